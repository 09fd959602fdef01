#!/usr/bin/env bash
# ztok's memory and time on one huge pre-token: for each class of GPT-2's pattern that can make a piece
# of any length, a file that is a single piece of N MB; peak RSS (/usr/bin/time -v), user and wall
# time, peak RSS per input byte ("x": the whole process, the bound issue 36 set at 8x the pre-token) and
# per input byte beyond ztok's fixed footprint (B/B: the same command on a one-line input subtracted).
#   tools/bench/ztok/huge_piece.sh [SIZES_MB] [CLASSES] [OTHER_ZTOK]
#     SIZES_MB default "10 50 200"; CLASSES default "letters digits punct spaces one-letter cjk";
#     also "ill-formed" (bytes 80..BF only: one piece of U+FFFD, 3 bytes each once repaired)
#     OTHER_ZTOK: a second ztok binary (e.g. an older build) run on the same inputs; its shards must
#     be byte-identical to this build's (#wrong counts those that are not).
# Inputs are pseudo-random (AES-CTR from openssl with a fixed key, so the same each run), mapped
# onto the class's characters. Prints a fixed table and one JSON line.
set -euo pipefail
sizes=${1:-10 50 200}
classes=${2:-letters digits punct spaces one-letter cjk}
other=${3:-}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${ZT_BUILD_DIR:-$root/build}
work=$build/bench/ztok-huge
die() { echo "bench-ztok-huge: $*" >&2; exit 1; }
[ -x "$build/bin/ztok" ] || die "build ztok first (tools/build.sh)"
[ -x /usr/bin/time ] || die "/usr/bin/time (Debian package time) is needed for peak RSS"
command -v openssl >/dev/null || die "openssl is needed for the pseudo-random inputs"
vocab=$root/data/vocab
"$root/tools/fetch-vocab.sh" "$vocab" >/dev/null
mkdir -p "$work"

repeat_to_256() { local s=$1; while [ ${#s} -lt 256 ]; do s=$s$1; done; printf '%s' "${s:0:256}"; }
pseudo_random() { head -c "$1" /dev/zero | openssl enc -aes-128-ctr -nosalt -K 5a746f6b2068756765207069656365 -iv 0 2>/dev/null; }
make_input() {  # make_input CLASS BYTES OUT
  case $1 in
    letters) pseudo_random "$2" | LC_ALL=C tr '\000-\377' "$(repeat_to_256 abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ)" ;;
    digits) pseudo_random "$2" | LC_ALL=C tr '\000-\377' "$(repeat_to_256 0123456789)" ;;
    punct) pseudo_random "$2" | LC_ALL=C tr '\000-\377' "$(repeat_to_256 '!"#$%&()*+,./:;<=>?@[]^_`{|}~')" ;;
    spaces) pseudo_random "$2" | LC_ALL=C tr '\000-\377' "$(repeat_to_256 $' \t\n')" ;;
    one-letter) head -c "$2" /dev/zero | LC_ALL=C tr '\000' a ;;
    ill-formed) pseudo_random "$2" | LC_ALL=C tr '\000-\377' '\200-\277\200-\277\200-\277\200-\277' ;;  # lone continuation bytes
    cjk) pseudo_random $((2 * $2 / 3)) | perl -e 'binmode STDOUT, ":utf8"; while (read(STDIN, my $b, 2) == 2) {
           my ($x, $y) = unpack("C2", $b); print chr(0x4E00 + (($x << 8) | $y) % 20000) }' ;;  # 3 bytes each
    *) die "unknown class $1" ;;
  esac >"$3"
}

run() {  # run ZTOK INPUT OUT: sets peak_kb user_s wall_s
  rm -rf "$3"
  /usr/bin/time -v -o "$work/time.txt" "$1" --vocab "$vocab" --out "$3" -q --threads 1 "$2" >/dev/null 2>"$work/err.txt" ||
    { cat "$work/err.txt"; die "$1 failed on $2"; }
  peak_kb=$(awk -F': ' '/Maximum resident/ {print $2}' "$work/time.txt")
  user_s=$(awk -F': ' '/User time/ {print $2}' "$work/time.txt")
  wall_s=$(awk -F': ' '/Elapsed/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$work/time.txt")
}

echo "one line" >"$work/small.txt"
run "$build/bin/ztok" "$work/small.txt" "$work/out"; base_kb=$peak_kb
[ -z "$other" ] || { run "$other" "$work/small.txt" "$work/out"; other_base_kb=$peak_kb; }
printf '%-11s %6s %10s %6s %9s %8s %8s %8s  %s\n' class MB "peak RSS" "x" "B/B" "user s" "wall s" "MB/s" "other: peak, x, B/B, user s, #wrong"
json="{\"bench\": \"ztok-huge-piece\", \"base_kb\": $base_kb, \"rows\": ["
sep=""
for mb in $sizes; do
  for class in $classes; do
    bytes=$((mb * 1000000))
    make_input "$class" "$bytes" "$work/in.txt"
    run "$build/bin/ztok" "$work/in.txt" "$work/out"
    per=$(awk -v p="$peak_kb" -v b="$base_kb" -v n="$bytes" 'BEGIN { printf "%.1f", (p - b) * 1024 / n }')
    times=$(awk -v p="$peak_kb" -v n="$bytes" 'BEGIN { printf "%.1f", p * 1024 / n }')
    rate=$(awk -v n="$bytes" -v t="$user_s" 'BEGIN { printf "%.1f", n / 1e6 / t }')
    row=$(printf '%-11s %6s %7d MB %6s %9s %8s %8s %8s' "$class" "$mb" $((peak_kb / 1024)) "$times" "$per" "$user_s" "$wall_s" "$rate")
    json+="$sep{\"class\": \"$class\", \"mb\": $mb, \"peak_kb\": $peak_kb, \"rss_per_input_byte\": $times, \"rss_per_byte\": $per, \"user_s\": $user_s, \"wall_s\": $wall_s"
    if [ -n "$other" ]; then
      run "$other" "$work/in.txt" "$work/out-other"
      wrong=0
      for f in "$work/out"/*.h5; do cmp -s "$f" "$work/out-other/$(basename "$f")" || wrong=$((wrong + 1)); done
      oper=$(awk -v p="$peak_kb" -v b="$other_base_kb" -v n="$bytes" 'BEGIN { printf "%.1f", (p - b) * 1024 / n }')
      otimes=$(awk -v p="$peak_kb" -v n="$bytes" 'BEGIN { printf "%.1f", p * 1024 / n }')
      row+=$(printf '  %7d MB, %5s, %5s, %7s, %d' $((peak_kb / 1024)) "$otimes" "$oper" "$user_s" "$wrong")
      json+=", \"other_peak_kb\": $peak_kb, \"other_rss_per_input_byte\": $otimes, \"other_rss_per_byte\": $oper, \"other_user_s\": $user_s, \"wrong\": $wrong"
    fi
    json+="}"
    sep=", "
    echo "$row"
  done
done
echo "$json]}"
