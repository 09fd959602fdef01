#!/usr/bin/env bash
# Loader benchmark: tokens/s one rank's prefetching loader delivers from HDF5 shards (in order and
# shuffled from freshly opened shards; shuffled once every chunk was read and verified; GPT-2 windows
# of 1025 tokens, micro 16 x accum 4 per step, rank 4 of 8), REPEAT runs of bench_loader (each checks
# one window per step against a direct read: #wrong), median and spread.
#   tools/bench/loader/run.sh [REPEAT]      (default 3; needs a build: tools/build.sh)
# Data: 50M random tokens in 5 shards of 10M (make_test_shards, vocab 50257), made once under
# build/bench/loader/data (1.1 GB in the page cache: the numbers are for shards already cached).
set -euo pipefail
repeat=${1:-3}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${ZT_BUILD_DIR:-$root/build}
data=$build/bench/loader/data
die() { echo "bench-loader: $*" >&2; exit 1; }
cmake --build "$build" --target bench_loader make_test_shards >/dev/null || die "build first (tools/build.sh)"
if [ ! -f "$data/train_000004.h5" ]; then
  mkdir -p "$data"
  "$build/tests/make_test_shards" "$data/train" --tokens 50000000 --shard-tokens 10000000 --vocab 50257 >/dev/null
fi
cat "$data"/train_*.h5 >/dev/null  # into the page cache
runs=()
for i in $(seq 1 "$repeat"); do runs+=("$("$build/bench/bench_loader" "$data/train_*.h5" | tail -n 1)"); done
printf '%s\n' "${runs[@]}" | python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin]
print("%-19s %14s %24s %7s" % ("order", "median tok/s", "spread (min..max)", "#wrong"))
out = {"bench": "loader", "repeat": len(rows), "wrong": sum(r["wrong"] for r in rows)}
for key, name in (("tokens_per_s_in_order", "in-order"), ("tokens_per_s_shuffled", "shuffled"),
                  ("tokens_per_s_shuffled_verified", "shuffled, verified")):
    if key not in rows[0]: continue
    v = [r[key] for r in rows]
    print("%-19s %14.3e %11.3e..%-11.3e %7d" % (name, statistics.median(v), min(v), max(v), out["wrong"]))
    out[key + "_median"] = float(f"{statistics.median(v):.4g}")
print(json.dumps(out))'
