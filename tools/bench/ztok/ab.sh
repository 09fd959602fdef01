#!/usr/bin/env bash
# ztok A/B: two ztok binaries end to end on the same corpus, runs alternating (A B A B ...) so that load
# drifts hit both alike. Per case: median wall and CPU (user + sys) seconds, the spread of the walls,
# peak RSS (maximum over runs), the peak size of OUT while it runs (one more run each, sampled every
# 50 ms: shards plus journals), and #wrong = shards of B that differ from A's (0 = byte-identical).
#   tools/bench/ztok/ab.sh OLD_ZTOK NEW_ZTOK [REPEAT]   (REPEAT 5 by default)
# Corpus: ZT_CORPUS (a folder of .txt files), else the SOTU addresses run.sh fetches (run it once);
# 10 copies of it (symlinks, 10x). Cases: one process with one shard (--threads 1); one process with
# many shards of both splits (--threads 2, --split paragraph, 1M-token shards, 5% valid); the same on
# mpirun -np 2 --threads 1 (skipped without mpirun); ZT_CASES picks some. Prints a table and a JSON line.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,9p "$0"; exit 2; }
old=$(realpath "$1") new=$(realpath "$2") repeat=${3:-5}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${ZT_BUILD_DIR:-$root/build}
work=$build/bench/ztok-ab
die() { echo "bench-ztok-ab: $*" >&2; exit 1; }
[ -x /usr/bin/time ] || die "/usr/bin/time (Debian package time) is needed for peak RSS"
vocab=$root/data/vocab
"$root/tools/fetch-vocab.sh" "$vocab" >/dev/null || die "no GPT-2 vocabulary (tools/fetch-vocab.sh)"
corpus=${ZT_CORPUS:-$build/bench/ztok/sotu}
ls "$corpus"/*.txt >/dev/null 2>&1 || die "no .txt files in $corpus: set ZT_CORPUS or run tools/bench/ztok/run.sh once"
rm -rf "$work" && mkdir -p "$work"
for k in $(seq 0 9); do mkdir -p "$work/in/copy$k" && ln -s "$(realpath "$corpus")"/*.txt "$work/in/copy$k/"; done
bytes=$(( $(cat "$corpus"/*.txt | wc -c) * 10 ))
cd "$work"  # relative input names (the validation split hashes them)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

declare -A args launcher
cases=(one-shard many-shards np2)
args[one-shard]="--threads 1"
args[many-shards]="--threads 2 --split paragraph --shard-tokens 1000000 --valid-fraction 0.05"
args[np2]="--threads 1 --split paragraph --shard-tokens 1000000 --valid-fraction 0.05"
launcher[one-shard]="" launcher[many-shards]="" launcher[np2]="mpirun --oversubscribe -np 2"
command -v mpirun >/dev/null || cases=(one-shard many-shards)
[ -z "${ZT_CASES:-}" ] || read -r -a cases <<<"$ZT_CASES"  # a subset, e.g. ZT_CASES="many-shards np2"

run() {  # run BIN CASE OUT: one timed run; prints "wall cpu rss_kb"
  rm -rf "$3"
  # shellcheck disable=SC2086  # the launcher and arguments are word lists
  /usr/bin/time -f '%e %U %S %M' -o "$work/time.txt" ${launcher[$2]} "$1" --vocab "$vocab" --out "$3" -q \
    ${args[$2]} 'in/*/*.txt' >/dev/null 2>"$work/err.txt" || { cat "$work/err.txt"; die "$1 failed on $2"; }
  awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }' "$work/time.txt"
}
peak_out_mb() {  # peak_out_mb BIN CASE: the largest size of OUT seen while one run goes
  local out=$work/peak peak=0 size pid
  run "$1" "$2" "$out" >/dev/null & pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    size=$(du -sk "$out" 2>/dev/null | cut -f1 || echo 0)
    [ "${size:-0}" -gt "$peak" ] && peak=$size
    sleep 0.05
  done
  wait "$pid"
  size=$(du -sk "$out" | cut -f1)  # the end, which sampling may miss
  [ "$size" -gt "$peak" ] && peak=$size
  echo $((peak / 1024))
}
count() { find "$1" -maxdepth 1 -name '*.h5' | wc -l; }  # shards in a folder
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

printf '\nztok A/B (%s, %s cores, %s, load average %s), %d MB of input, %d alternating runs each\n' "$(uname -m)" \
  "$(nproc)" "$(date -u +%Y-%m-%d)" "$(cut -d' ' -f1-3 /proc/loadavg)" $((bytes / 1000000)) "$repeat"
printf 'A: %s\nB: %s\n' "$old" "$new"
printf '%-12s %-2s %9s %13s %9s %9s %10s %7s\n' case bin "wall s" spread "cpu s" "RSS MB" "OUT peak" "#wrong"
json=""
for c in "${cases[@]}"; do
  declare -A walls=() cpus=() rss=()
  for _ in $(seq 1 "$repeat"); do
    for side in A B; do
      bin=$old; [ $side = B ] && bin=$new
      read -r w u m < <(run "$bin" "$c" "$work/out-$side")
      walls[$side]+="$w "; cpus[$side]+="$u "; [ "$m" -gt "${rss[$side]:-0}" ] && rss[$side]=$m
    done
  done
  wrong=0
  for f in out-A/*.h5; do cmp -s "$f" "out-B/$(basename "$f")" || wrong=$((wrong + 1)); done
  [ "$(count out-A)" = "$(count out-B)" ] || wrong=$((wrong + 1))
  for side in A B; do
    bin=$old; [ $side = B ] && bin=$new
    w=$(tr ' ' '\n' <<<"${walls[$side]}" | grep . | median)
    lo=$(tr ' ' '\n' <<<"${walls[$side]}" | grep . | sort -g | head -1)
    hi=$(tr ' ' '\n' <<<"${walls[$side]}" | grep . | sort -g | tail -1)
    u=$(tr ' ' '\n' <<<"${cpus[$side]}" | grep . | median)
    peak=$(peak_out_mb "$bin" "$c")
    printf '%-12s %-2s %9s %6s..%-6s %9s %9d %10s %7s\n' "$c" "$side" "$w" "$lo" "$hi" "$u" $((rss[$side] / 1024)) \
      "$peak MB" "$([ $side = A ] && echo ref || echo $wrong)"
    json+="\"${c}_${side}_wall_s\": $w, \"${c}_${side}_cpu_s\": $u, \"${c}_${side}_rss_kb\": ${rss[$side]}, \"${c}_${side}_out_peak_mb\": $peak, "
  done
  json+="\"${c}_wrong\": $wrong, "
done
printf '{"bench": "ztok-ab", "bytes": %d, "repeat": %d, %s"load": "%s"}\n' "$bytes" "$repeat" "$json" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
