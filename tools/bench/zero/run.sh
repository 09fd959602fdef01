#!/usr/bin/env bash
# ZeRO stages 0-3 on W CPU ranks (default 4, mpirun --oversubscribe): step time, the payload bytes each
# rank hands to collectives per step (metrics comm_bytes) next to the theory, and the per-rank model
# state ("memory per rank" at start-up) next to the theory. Prints a fixed table and one JSON line
# (tools/bench/zero/report.py); record results in BENCHMARKS.md.
#   tools/bench/zero/run.sh [--np 4] [--accum 1] [--warmup 3] [--steps 10] [--threads 1] [--out DIR]
# Model: n_layer 4, n_embd 128, n_head 4, seq_len 128, vocab 50257, micro-batch 2 (ZT_BENCH_MODEL
# overrides: "L C H T V B"); global batch = micro-batch x accum x np. Needs build/bin/ztrain and
# build/tests/make_test_shards (tools/build.sh) and mpirun.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
source "$root/tools/bench/wait_quiet.sh"  # ZT_BENCH_MAX_LOAD=1: wait for a quiet machine before each run
here="$root/tools/bench/zero"
build=${ZT_BUILD_DIR:-$root/build}
py=${ZT_PYTHON:-/usr/bin/python3}
np=4 accum=1 warmup=3 steps=10 threads=1 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --np) np=$2; shift 2 ;;
    --accum) accum=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
read -r L C H T V B <<<"${ZT_BENCH_MODEL:-4 128 4 128 50257 2}"
for bin in "$build/bin/ztrain" "$build/tests/make_test_shards"; do
  [ -x "$bin" ] || { echo "run.sh: $bin is missing: build it first (tools/build.sh)" >&2; exit 2; }
done
command -v "${MPIEXEC:-mpirun}" >/dev/null || { echo "run.sh: mpirun not found (set MPIEXEC)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none

if [ -z "$out" ]; then
  out=$(mktemp -d /tmp/zt_bench_zero.XXXXXX)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out/data"
"$build/tests/make_test_shards" "$out/data/train" --tokens 400000 --vocab "$V" --seed 1 >/dev/null

args=()
for stage in 0 1 2 3; do
  echo "ZeRO stage $stage on $np ranks ($warmup + $steps steps) ..." >&2
  loadavg=$(wait_quiet)
  "${MPIEXEC:-mpirun}" --oversubscribe -np "$np" "$build/bin/ztrain" --train.device=cpu --train.threads="$threads" \
    --model.n_layer="$L" --model.n_embd="$C" --model.n_head="$H" --model.seq_len="$T" --model.vocab_size="$V" \
    --train.micro_batch="$B" --train.global_batch=$((B * accum * np)) --train.zero_stage="$stage" \
    --train.max_steps=$((warmup + steps)) --data.train="$out/data/train_*.h5" --log.every=1 \
    --log.metrics="$out/zero$stage.jsonl" >"$out/zero$stage.log" 2>&1 ||
    { tail -n 20 "$out/zero$stage.log" >&2; echo "run.sh: ztrain failed (stage $stage)" >&2; exit 1; }
  args+=(--run "$stage:$loadavg:$out/zero$stage.jsonl:$out/zero$stage.log")
done
"$py" "$here/report.py" --np "$np" --accum "$accum" --warmup "$warmup" --steps "$steps" --threads "$threads" \
  --model "$L,$C,$H,$T,$V,$B" "${args[@]}"
