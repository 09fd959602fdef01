#!/usr/bin/env bash
# ztok's memory on one huge pre-token: a 16 MB line of letters without a space is a single piece, which
# must be held whole; its peak RSS beyond ztok's fixed footprint (the same command on a one-line input)
# stays under K bytes per input byte. Measured 5.3-5.9 bytes per byte with the lean merge (issue 36;
# tools/bench/ztok/huge_piece.sh, BENCHMARKS.md), 8-13 with the heap merge before it, 24 before that.
# Not timed.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../ztok/common.sh"
[ -x /usr/bin/time ] || { echo "SKIP: /usr/bin/time (Debian package time) is needed to measure peak RSS"; exit 77; }
K=7  # the bound ztok --help and docs/guide/data-and-ztok.md state
bytes=16000000

letters=$(printf '%s' abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ{,,,,})  # 260 >= 256 letters
pseudo_random() {  # N bytes, the same each run where openssl is there
  if command -v openssl >/dev/null; then
    head -c "$1" /dev/zero | openssl enc -aes-128-ctr -nosalt -K 00112233445566778899aabbccddeeff -iv 0 2>/dev/null
  else
    head -c "$1" /dev/urandom
  fi
}
pseudo_random "$bytes" | LC_ALL=C tr '\000-\377' "$letters" >"$work/piece.txt"
[ "$(stat -c %s "$work/piece.txt")" = "$bytes" ] || fail "could not make the input"
echo "one letters line" >"$work/small.txt"

peak_kb() {  # peak_kb INPUT: ztok's maximum RSS in KiB
  rm -rf "$work/out"
  /usr/bin/time -f %M -o "$work/rss" "$ztok" --vocab "$vocab" --out "$work/out" -q --threads 1 "$1" >/dev/null 2>"$work/err" ||
    { cat "$work/err"; fail "ztok failed on $1"; }
  cat "$work/rss"
}
base=$(peak_kb "$work/small.txt")
peak=$(peak_kb "$work/piece.txt")
per_byte=$(awk -v p="$peak" -v b="$base" -v n="$bytes" 'BEGIN { printf "%.1f", (p - b) * 1024 / n }')
echo "fixed ${base} KiB, with the 16 MB piece ${peak} KiB: ${per_byte} bytes of RSS per input byte (bound $K)"
awk -v x="$per_byte" -v k="$K" 'BEGIN { exit !(x < k) }' || fail "memory per byte of one huge piece is $per_byte, over $K"
echo "PASS"
