#!/usr/bin/env bash
# JSONL input: documents from a field; a line that is not JSON, lacks the field or holds a non-string
# stops ztok with exit 2 naming the file and line; blank lines are skipped.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
printf '{"text": "Hello world", "id": 1}\n\n{"id": 2, "text": "caf\\u00e9 it'"'"'s\\n\\nfine"}\n  \n{"text": ""}\n' >"$work/good.jsonl"
"$ztok" --vocab "$vocab" --out "$work/good" --format jsonl -q "$work/good.jsonl" >/dev/null
"$shard_dump" docs "$work/good/train_000000.h5" | grep ': 0 3 ' >/dev/null || fail "document offsets of good.jsonl"
"$shard_dump" info "$work/good/train_000000.h5" | grep -x 'n_docs=3' >/dev/null || fail "good.jsonl should give 3 documents"
"$ztok" --vocab "$vocab" --out "$work/body" --format jsonl --field body -q "$work/good.jsonl" >/dev/null 2>"$work/e.log" &&
  fail "a missing --field was accepted"
grep -q 'good.jsonl:1: no field "body"' "$work/e.log" || fail "missing field message: $(cat "$work/e.log")"

expect_error() {  # NAME CONTENT LINE NEEDLE
  printf "$2" >"$work/$1"
  set +e
  "$ztok" --vocab "$vocab" --out "$work/out-$1" --format jsonl -q "$work/$1" >/dev/null 2>"$work/$1.log"
  local rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$1: exit $rc, expected 2"
  grep -q "$1:$3: .*$4" "$work/$1.log" || fail "$1: message lacks '$1:$3: ... $4': $(cat "$work/$1.log")"
  echo "ok: $1 -> $(tail -n 1 "$work/$1.log")"
}
expect_error notjson.jsonl '{"text": "a"}\n{"text": "b"}\n{"text": oops}\n' 3 'not valid JSON'
expect_error nofield.jsonl '{"text": "a"}\n\n{"content": "b"}\n' 3 'no field "text"'
expect_error number.jsonl '{"text": 42}\n' 1 'not a string'
expect_error array.jsonl '["text"]\n' 1 'a JSON array, not an object'
expect_error string.jsonl '"just a string"\n' 1 'a JSON string, not an object: each line must be an object holding the text in field "text"'
expect_error truncated.jsonl '{"text": "a"}\n{"text": "unterminated' 2 'not valid JSON'
set +e; "$ztok" --vocab "$vocab" --out "$work/x" --format jsonl --split paragraph "$work/good.jsonl" 2>/dev/null; rc=$?; set -e
[ $rc -eq 2 ] || fail "--split with --format jsonl: exit $rc, expected 2"
# Options that would be ignored or mistyped are named: --field without --format jsonl, an id out of
# range, GPT-2's encoder.json for its directory, a model directory for its tokenizer.json.
refused() {  # NEEDLE ARGS...: exit 2 with NEEDLE in the message
  local needle=$1; shift
  set +e; "$ztok" "$@" 2>"$work/refused.log" >/dev/null; local rc=$?; set -e
  [ $rc -eq 2 ] && grep -q -- "$needle" "$work/refused.log" || fail "expected exit 2 with '$needle', got $rc: $(cat "$work/refused.log")"
}
refused "--field applies to --format jsonl" --vocab "$vocab" --out "$work/x" --field text "$work/good.jsonl"
refused "the id 4294967296 is out of range" --vocab "$vocab" --out "$work/x" --format instruct --chat-template chatml \
  --special '<|im_start|>=4294967296' "$work/good.jsonl"
refused "is GPT-2's encoder.json, which comes with vocab.bpe: pass their directory" --vocab "$vocab/encoder.json" \
  --out "$work/x" "$work/good.jsonl"
mkdir -p "$work/model" && echo '{}' >"$work/model/tokenizer.json"
refused "is a model directory with a tokenizer.json" --vocab "$work/model" --out "$work/x" "$work/good.jsonl"
set +e; "$ztok" --vocab "$vocab" --out "$work/x" "$work/missing.txt" 2>/dev/null; rc=$?; set -e
[ $rc -eq 2 ] || fail "a missing input: exit $rc, expected 2"
set +e; "$ztok" --vocab "$work" --out "$work/x" "$work/good.jsonl" 2>/dev/null; rc=$?; set -e
[ $rc -eq 2 ] || fail "a missing vocabulary: exit $rc, expected 2"
echo "ok: usage errors exit 2"
# A glob matching a link to nothing (storage not mounted) or a FIFO is refused naming it, as the path given
# directly is; a directory it matches is skipped (sweep 23 F6).
mkdir -p "$work/globbed/sub"
printf '{"text": "one"}\n' >"$work/globbed/a.jsonl"
ln -s "$work/nowhere/b.jsonl" "$work/globbed/b.jsonl"
set +e; "$ztok" --vocab "$vocab" --out "$work/g1" --format jsonl -q "$work/globbed/*" >/dev/null 2>"$work/g1.log"; rc=$?; set -e
[ $rc -eq 2 ] || fail "a glob matching a dangling link: exit $rc, expected 2"
grep -q "matches $work/globbed/b.jsonl, which is a link to nothing" "$work/g1.log" || fail "dangling link not named: $(cat "$work/g1.log")"
rm "$work/globbed/b.jsonl"
"$ztok" --vocab "$vocab" --out "$work/g2" --format jsonl -q "$work/globbed/*" >/dev/null || fail "a glob matching a directory"
echo "ok: a glob's dangling link is refused, its directory skipped"
