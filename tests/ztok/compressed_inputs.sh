#!/usr/bin/env bash
# .gz and .zst inputs (also concatenated members / frames) give the same ids as the plain files;
# a truncated compressed input is bad input (exit 2) naming it.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
make_corpus "$work/plain" 3 3000
mkdir -p "$work/gz" "$work/zst"
for f in "$work/plain"/*.txt; do
  n=$(basename "$f")
  head -c 20000 "$f" | gzip -c >"$work/gz/$n.gz"; tail -c +20001 "$f" | gzip -c >>"$work/gz/$n.gz"  # two members
  zstd -q -c "$f" >"$work/zst/$n.zst"
done
for kind in plain gz zst; do
  "$ztok" --vocab "$vocab" --out "$work/out-$kind" --split paragraph -q "$work/$kind/*" >/dev/null
  tokens_of "$work/$kind.u32" "$work/out-$kind"/train_*.h5
done
cmp "$work/plain.u32" "$work/gz.u32" || fail ".gz inputs give other ids than the plain files"
cmp "$work/plain.u32" "$work/zst.u32" || fail ".zst inputs give other ids than the plain files"
"$shard_dump" info "$work/out-gz/train_000000.h5" | grep 'part_001.txt.gz' >/dev/null || fail "sources should name the .gz inputs"
echo "ok: plain, .gz (two members) and .zst give identical ids"
head -c 5000 "$work/zst/part_002.txt.zst" >"$work/cut.zst"
set +e; "$ztok" --vocab "$vocab" --out "$work/out-cut" -q "$work/cut.zst" >/dev/null 2>"$work/cut.log"; rc=$?; set -e
[ $rc -eq 2 ] || fail "truncated .zst: exit $rc, expected 2 (bad input, as --help says; sweep 23 F7)"
grep -q 'cut.zst is truncated' "$work/cut.log" || fail "truncated input not named: $(cat "$work/cut.log")"
head -c 3000 "$work/gz/part_001.txt.gz" >"$work/cut.gz"
set +e; "$ztok" --vocab "$vocab" --out "$work/out-cutgz" -q "$work/cut.gz" >/dev/null 2>"$work/cutgz.log"; rc=$?; set -e
[ $rc -eq 2 ] || fail "truncated .gz: exit $rc, expected 2"
grep -q 'cut.gz is truncated' "$work/cutgz.log" || fail "truncated .gz not named: $(cat "$work/cutgz.log")"
echo "ok: a truncated .zst or .gz input is named (exit 2)"
# A damaged byte mid-member decompresses to garbage before the member's checksum is read: in JSONL (and
# instruction data) the garbage first fails as a bad line; the file's damage is what is said (sweep 27 F5).
/usr/bin/python3 - "$work/plain/part_001.txt" "$work/docs.jsonl" "$work/chat.jsonl" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
with open(sys.argv[2], "w") as f:
    for i in range(0, len(text), 400): f.write(json.dumps({"text": text[i:i + 400]}) + "\n")
with open(sys.argv[3], "w") as f:
    for i in range(0, len(text), 400): f.write(json.dumps({"prompt": text[i:i + 200], "response": text[i + 200:i + 400]}) + "\n")
PY
for name in docs chat; do
  gzip -c "$work/$name.jsonl" >"$work/$name.jsonl.gz"
  /usr/bin/python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=0xFF; open(p,'wb').write(b)" "$work/$name.jsonl.gz"
done
chatml=(--chat-template chatml --special '<|im_start|>=50257' --special '<|im_end|>=50258')
for kind in docs chat; do
  set -- "$kind" --format jsonl
  [ "$kind" = chat ] && set -- "$kind" --format instruct "${chatml[@]}"
  name=$1; shift
  set +e; "$ztok" --vocab "$vocab" --out "$work/out-bad-$name" -q "$@" "$work/$name.jsonl.gz" >/dev/null 2>"$work/bad-$name.log"; rc=$?; set -e
  set -- "$name" "" "$2"
  [ $rc -eq 2 ] || fail "damaged $1.jsonl.gz ($3): exit $rc, expected 2"
  grep -q "$1.jsonl.gz is not valid gzip" "$work/bad-$1.log" || fail "damaged $1.jsonl.gz ($3) not named as such: $(cat "$work/bad-$1.log")"
done
echo "ok: a damaged .jsonl.gz is named as damaged gzip, not as bad JSON (jsonl and instruct)"
# Bytes after the last member that start no member (gzip -d warns "trailing garbage ignored"): refused,
# naming how many and from where, not as "incorrect header check" (sweep 39 F7c).
{ printf 'hello world\n' | gzip; printf 'GARBAGE!!'; } >"$work/trailing.txt.gz"
set +e
"$ztok" --vocab "$vocab" --out "$work/trailing" -q "$work/trailing.txt.gz" >/dev/null 2>"$work/trailing.log"
rc=$?
set -e
[ $rc -eq 2 ] || fail "trailing data after gzip: exit $rc, expected 2"
grep -q "trailing.txt.gz has 9 byte(s) after the end of its gzip data (from byte [0-9]*) that are not gzip" "$work/trailing.log" ||
  fail "trailing data after gzip: $(cat "$work/trailing.log")"
echo "ok: bytes after the gzip data are named as such"
