#!/usr/bin/env bash
# ztok on input that is not UTF-8: a binary file among text files is warned about once, with its name
# and the share of its bytes replaced by U+FFFD, while a text with a few stray bad bytes (under 1%) is
# not; --strict-utf8 refuses the binary file (exit 2) naming the file and the offset of its first bad
# byte (checked against iconv), and on clean input changes nothing.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../ztok/common.sh"

make_corpus "$work/in" 2 600
# Bytes 1..255 in a fixed pseudo-random order (no NUL, which awk cannot print): about 45% ill-formed.
{ printf 'a readable header line\n'; LC_ALL=C awk 'BEGIN { x = 7; for (i = 0; i < 40000; i++) {
  x = (x * 1103515245 + 12345) % 2147483648; printf "%c", 1 + int(x / 65536) % 255 } }'; } >"$work/in/blob.bin"
{ cat "$work/in/part_001.txt"; printf 'caf\xe9 \xff\n'; } >"$work/in/stray.txt"  # 2 bad bytes in ~25 KB

expect_warnings() {  # expect_warnings ERR: the blob is warned about once, stray.txt not at all
  [ "$(grep -c 'blob.bin: [0-9.]*% of its bytes ([0-9]* of [0-9]*) are not valid UTF-8' "$1")" = 1 ] ||
    { cat "$1"; fail "the binary file is not warned about exactly once"; }
  ! grep -q "stray.txt" "$1" || { cat "$1"; fail "a file with 2 bad bytes in 25 KB is warned about"; }
}
inputs=("$work/in/part_001.txt" "$work/in/blob.bin" "$work/in/stray.txt" "$work/in/part_002.txt")
"$ztok" --vocab "$vocab" --out "$work/plain" -q --threads 2 "${inputs[@]}" >"$work/out.txt" 2>"$work/err.txt" ||
  { cat "$work/err.txt"; fail "ztok failed on a binary input"; }
expect_warnings "$work/err.txt"
share=$(grep -o 'blob.bin: [0-9.]*%' "$work/err.txt" | grep -o '[0-9.]*%')
awk -v s="${share%\%}" 'BEGIN { exit !(s > 30 && s < 70) }' || fail "implausible share of bad bytes: $share"
"$ztok" --vocab "$vocab" --out "$work/chunks" -q --threads 2 --debug-chunk-bytes 4096 "${inputs[@]}" 2>"$work/err.txt" >/dev/null ||
  fail "ztok with small chunks failed"
expect_warnings "$work/err.txt"  # once per file, however many chunks it spans

# --strict-utf8: exit 2, the file and the first bad byte's offset as iconv counts it.
first_bad=$(iconv -f UTF-8 -t UTF-8 "$work/in/blob.bin" 2>&1 >/dev/null | grep -o 'position [0-9]*' | grep -o '[0-9]*' || true)
[ -n "$first_bad" ] || fail "iconv found no ill-formed byte in the blob"
rc=0
"$ztok" --vocab "$vocab" --out "$work/strict" -q --strict-utf8 "${inputs[@]}" >"$work/out.txt" 2>"$work/err.txt" || rc=$?
[ "$rc" = 2 ] || { cat "$work/err.txt"; fail "--strict-utf8 on a binary file: expected exit 2, got $rc"; }
grep -q "blob.bin: not valid UTF-8 at byte offset $first_bad (byte 0x" "$work/err.txt" ||
  { cat "$work/err.txt"; fail "the refusal does not name the file and offset $first_bad"; }

# Clean input: --strict-utf8 gives the same shards as without it.
"$ztok" --vocab "$vocab" --out "$work/clean" -q "$work/in/part_00"*.txt >/dev/null 2>&1 || fail "clean run failed"
"$ztok" --vocab "$vocab" --out "$work/clean-strict" -q --strict-utf8 "$work/in/part_00"*.txt >/dev/null 2>"$work/err.txt" ||
  { cat "$work/err.txt"; fail "--strict-utf8 refused valid UTF-8"; }
same_shards "$work/clean" "$work/clean-strict" "--strict-utf8 on clean input"
echo "warned once (blob.bin: $share replaced), strict exit 2 at offset $first_bad"
# JSONL and instruction records: --strict-utf8 refuses raw ill-formed bytes and the escape of a lone
# surrogate (which decodes to no text), naming FILE:LINE; instruct mode honoured it not at all before.
printf '{"text": "ok \\ud83d\\ude00"}\n{"text": "x\\ud800y"}\n' >"$work/surr.jsonl"
printf '{"prompt": "a", "response": "b"}\n{"prompt": "caf\xe9", "response": "b"}\n' >"$work/bad_instruct.jsonl"
printf '{"prompt": "\\udc00", "response": "b"}\n' >"$work/surr_instruct.jsonl"
check_strict() {  # WHAT NEEDLE ZTOK-ARGS...
  local what=$1 needle=$2 rc=0; shift 2
  "$ztok" --vocab "$vocab" --out "$work/strict-$RANDOM" -q --strict-utf8 "$@" >/dev/null 2>"$work/err.txt" || rc=$?
  [ "$rc" = 2 ] && grep -qF "$needle" "$work/err.txt" || { cat "$work/err.txt"; fail "$what: exit $rc"; }
  grep -qF -- "--strict-utf8 refuses it" "$work/err.txt" || { cat "$work/err.txt"; fail "$what: no fix"; }
}
instruct=(--format instruct --chat-template chatml --special '<|im_start|>=50257' --special '<|im_end|>=50258')
check_strict "jsonl, lone surrogate escape" "surr.jsonl:2: a \\uD800-\\uDFFF escape that is not half of a surrogate pair" \
  --format jsonl "$work/surr.jsonl"
check_strict "instruct, ill-formed byte" "bad_instruct.jsonl:2: not valid UTF-8 at byte 15 of the line (byte 0xE9)" \
  "${instruct[@]}" "$work/bad_instruct.jsonl"
check_strict "instruct, lone surrogate escape" "surr_instruct.jsonl:1: a \\uD800-\\uDFFF escape" \
  "${instruct[@]}" "$work/surr_instruct.jsonl"
echo "strict JSONL and instruct records: refused naming FILE:LINE"
echo "PASS"
