#!/usr/bin/env bash
# ztok --vocab with tiktoken rank files: cl100k_base is recognised by content (its name, size, end of
# text and uint32 ids land in the shards; threads and small chunks give the same bytes); a rank file of
# no known encoding needs --pattern and --special; wrong options are exit 2 with the reason.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
if ! "$root/tools/fetch-vocab.sh" --encoding cl100k_base >"$work/fetch.log" 2>&1; then
  echo "SKIP: no cl100k_base rank file ($(tail -n 1 "$work/fetch.log"))"
  exit 77
fi
cl100k=$root/data/cl100k_base.tiktoken
cd "$work"
make_corpus in 3 800
"$ztok" --vocab "$cl100k" --out "$work/t1" --split paragraph --threads 1 -q "in/*.txt" >/dev/null
"$ztok" --vocab "$cl100k" --encoding cl100k_base --out "$work/t2" --split paragraph --threads 2 --debug-chunk-bytes 300 \
  -q "in/*.txt" >/dev/null
same_shards "$work/t1" "$work/t2" "cl100k_base, 1 thread vs 2 threads and 300-byte chunks"
info=$("$shard_dump" info "$work/t1/train_000000.h5")
for want in tokenizer=cl100k_base vocab_size=100277 eot=100257 wide_tokens=1 \
    vocab_hash=223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7; do
  grep -qx "$want" <<<"$info" || fail "shard info lacks $want: $info"
done
tokens_of "$work/ids.u32" "$work/t1"/*.h5
docs=$(for f in "$work/t1"/*.h5; do "$shard_dump" info "$f"; done | awk -F= '$1 == "n_docs" { n += $2 } END { print n }')
eots=$(od -An -tu4 -v "$work/ids.u32" | awk '{ for (i = 1; i <= NF; i++) if ($i == 100257) n++ } END { print n + 0 }')
[ "$docs" -gt 3 ] && [ "$eots" = "$docs" ] || fail "$eots <|endoftext|> (100257) in the shards for $docs documents"
echo "ok: cl100k_base shards (uint32 ids, tokenizer, vocab_size, eot) identical for 1/2 threads and small chunks"

# A rank file of no known encoding: the first 300 ranks of cl100k_base.
head -n 300 "$cl100k" >"$work/small.tiktoken"
expect_exit2() {  # WHAT GREP ARGS...: ztok ARGS... exits 2 and says GREP
  local what=$1 want=$2 rc=0; shift 2
  "$ztok" --out "$work/bad" -q "$@" in/part_001.txt >"$work/out.txt" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "$what: exit $rc, expected 2: $(cat "$work/out.txt")"
  grep -q -- "$want" "$work/out.txt" || fail "$what: message lacks '$want': $(cat "$work/out.txt")"
}
expect_exit2 "unknown rank file alone" "--pattern gpt2|cl100k|o200k" --vocab "$work/small.tiktoken"
expect_exit2 "no --special" "--special" --vocab "$work/small.tiktoken" --pattern cl100k
expect_exit2 "bad --pattern" "must be gpt2, cl100k or o200k" --vocab "$work/small.tiktoken" --pattern p50k --special '<|endoftext|>=300'
expect_exit2 "bad --special" "is not NAME=ID" --vocab "$work/small.tiktoken" --pattern cl100k --special '<|endoftext|>'
expect_exit2 "no <|endoftext|>" "no <|endoftext|>" --vocab "$work/small.tiktoken" --pattern cl100k --special '<|pad|>=300'
expect_exit2 "wrong --encoding" "is not o200k_base" --vocab "$cl100k" --encoding o200k_base
expect_exit2 "--special on a known encoding" "brings its own pattern" --vocab "$cl100k" --special '<|endoftext|>=5'
"$ztok" --vocab "$work/small.tiktoken" --pattern o200k --special '<|endoftext|>=300' --out "$work/small" -q \
  in/part_001.txt >/dev/null
info=$("$shard_dump" info "$work/small/train_000000.h5")
for want in tokenizer=tiktoken-ranks/o200k vocab_size=301 eot=300 wide_tokens=0; do
  grep -qx "$want" <<<"$info" || fail "custom rank file: shard info lacks $want: $info"
done
echo "ok: a rank file of no known encoding needs --pattern and --special; wrong options exit 2 naming why"
