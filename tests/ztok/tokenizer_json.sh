#!/usr/bin/env bash
# ztok --vocab tokenizer.json end to end on the hand-written tests/unit/tok/data/tiny_tokenizer.json:
# BOS before and end of text after every document, the shard records kind and BOS; files ztok does not
# read are refused with exit 2 naming the JSON path, and so are --encoding/--pattern/--special; ztrain checks the shards against data.vocab and
# model.vocab_size (padding allowed) and decodes its text samples with the tokenizer.json.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tiny=$here/../unit/tok/data/tiny_tokenizer.json
shard_dump=$ZT_BIN/../tests/shard_dump

printf 'abcd xyz\n\n<t>x <s> world' >"$ZT_WORK/two.txt"
expect_exit 0 "$ZT_BIN/ztok" -q --vocab "$tiny" --split paragraph --out "$ZT_WORK/tok" "$ZT_WORK/two.txt"
"$shard_dump" info "$ZT_WORK/tok/train_000000.h5" >"$ZT_WORK/info"
for line in tokenizer=hf-bpe bos=267 eot=266 vocab_size=271 ids=uint16 n_docs=2; do
  grep -qx "$line" "$ZT_WORK/info" || { cat "$ZT_WORK/info"; fail "shard info lacks $line"; }
done
"$shard_dump" tokens "$ZT_WORK/ids.u32" "$ZT_WORK/tok/train_000000.h5"
got=$(od -An -tu4 -v "$ZT_WORK/ids.u32" | xargs)
# <s> abcd -> ab cd, " xyz" -> " " x yz (merge order), </s>; <s> "<t>x" (longest added token) " " "<" "s" ">"
# (a special token's text is text) " w" "or" l d </s>
want="267 258 257 32 120 259 266 267 269 32 60 115 62 262 264 108 100 266"
[ "$got" = "$want" ] || fail "ids: got $got, want $want"
echo "ok: ztok shard ids $got"

# refused FILE_EDIT NEEDLE: a changed tiny tokenizer.json is refused with exit 2 and the needle.
refused() {
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[2]); json.dump(d, open(sys.argv[3],"w"))' \
    "$tiny" "$1" "$ZT_WORK/bad.json"
  expect_exit 2 "$ZT_BIN/ztok" -q --vocab "$ZT_WORK/bad.json" --out "$ZT_WORK/bad" "$ZT_WORK/two.txt"
  expect_in "$ZT_WORK/err" "$2"
  echo "refused: $(grep -Eo "$2.{0,60}" "$ZT_WORK/err" | head -n 1)"
}
refused 'd["model"]["type"]="Unigram"' 'model.type is "Unigram"'
refused 'd["pre_tokenizer"]={"type":"Metaspace"}' 'pre_tokenizer is a Metaspace pre-tokenizer'
refused 'd["pre_tokenizer"]={"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\p{N}{1,3}"},"behavior":"Isolated","invert":False},{"type":"ByteLevel","use_regex":False}]}' \
  'pattern "\\p\{N\}\{1,3\}", for which ztok has no exact scanner'
# The rank-file options do not apply to a tokenizer.json (it brings its own pattern and special tokens).
expect_exit 2 "$ZT_BIN/ztok" -q --vocab "$tiny" --pattern cl100k --out "$ZT_WORK/bad" "$ZT_WORK/two.txt"
expect_in "$ZT_WORK/err" "is a tokenizer.json, which brings its own pattern and special tokens"

# ztrain: the shards against data.vocab and the model's vocabulary, samples decoded with the tokenizer.json.
train=(--model.n_layer=1 --model.n_head=2 --model.n_embd=16 --model.seq_len=4 --train.device=cpu --train.threads=1
       --train.global_batch=2 --train.micro_batch=1 --train.max_steps=2 --log.every=1 --ckpt.dir="$ZT_WORK/ckpt"
       --data.train="$ZT_WORK/tok/train_*.h5")
expect_exit 2 "$ZT_BIN/ztrain" "${train[@]}" --model.vocab_size=270 --data.vocab="$tiny"
expect_in "$ZT_WORK/err" "has vocab_size 271 \(hf-bpe tokenizer\) but the model has only 270: set model.vocab_size to at least 271"
make_tiny_data
expect_exit 2 "$ZT_BIN/ztrain" "${train[@]}" --model.vocab_size=320 --data.vocab="$tiny" --data.train="$ZT_WORK/data/train_*.h5"
expect_in "$ZT_WORK/err" "was tokenized with vocabulary synthetic \\(synthetic-bigram tokenizer\\), but data.vocab has $(sha256sum "$tiny" | cut -c1-64): set data.vocab"
expect_exit 0 "$ZT_BIN/ztrain" "${train[@]}" --model.vocab_size=320 --data.vocab="$tiny" --log.sample_every=1 \
  --log.sample_tokens=8 --ckpt.dir="$ZT_WORK/ckpt2"
expect_in "$ZT_WORK/out" "sample" "no text sample logged"
echo "ok: ztrain with a padded vocabulary (320 > 271) sampled and decoded with tiny_tokenizer.json"
