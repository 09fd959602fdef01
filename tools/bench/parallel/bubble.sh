#!/usr/bin/env bash
# The pipeline bubble, measured against theory, on CPU ranks: for 1F1B and the interleaved schedule
# (parallel.vpp=2) at m = 2, 4, 8 micro-batches per step, the `pipeline_bubble` metric (share of the
# pipeline passes' time the stages waited in transfers, mean over ranks) and the step time, each the
# median of the steps after the warm-up, beside (p-1)/(v m + p-1).
#   tools/bench/parallel/bubble.sh [--pp 2] [--steps 8] [--warmup 2]
# Model: GPT-2 8 blocks x 256, T=128, vocabulary 512, micro-batch 2, 1 thread a rank (the bubble
# table's model in BENCHMARKS.md). The theory assumes equal stages and free transfers; the measured wait
# includes the transfers and, on an oversubscribed machine, the waiting rank's polling. Set
# ZT_BENCH_MAX_LOAD to wait for a quiet machine before each run (tools/bench/wait_quiet.sh); the load
# average is printed with each row.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
source "$root/tools/bench/wait_quiet.sh"
bin=${ZT_BUILD_DIR:-$root/build}
pp=2 steps=8 warmup=2
while [ $# -gt 0 ]; do
  case "$1" in
    --pp) pp=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "bubble.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$bin/bin/ztrain" ] || { echo "bubble.sh: $bin/bin/ztrain is missing: build it first (tools/build.sh)" >&2; exit 2; }
work=$(mktemp -d /tmp/zt_bench_bubble.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$bin/tests/make_test_shards" "$work/train" --tokens 200000 --vocab 512 --seed 5 >/dev/null
model=(--model.n_layer=8 --model.n_embd=256 --model.n_head=4 --model.seq_len=128 --model.vocab_size=512
       --train.device=cpu --train.threads=1 --train.micro_batch=2 --data.train="$work/train_*.h5" --log.every=1
       --ckpt.every=0 --ckpt.resume=none --train.max_steps=$((warmup + steps)))
printf '%-12s %3s %8s %9s %8s %6s\n' schedule m theory measured step_ms load
for schedule in 1f1b interleaved; do
  sched=(--parallel.schedule="$schedule")
  v=1
  [ "$schedule" = interleaved ] && { v=2; sched+=(--parallel.vpp=2); }
  for m in 2 4 8; do
    load=$(wait_quiet)
    out="$work/$schedule-$m.jsonl"
    mpirun --oversubscribe -np "$pp" "$bin/bin/ztrain" "${model[@]}" --parallel.pp="$pp" "${sched[@]}" \
      --train.global_batch=$((2 * m)) --log.metrics="$out" --ckpt.dir="$work/ckpt-$schedule-$m" >"$work/log" 2>&1 ||
      { tail -n 5 "$work/log" >&2; echo "bubble.sh: ztrain failed ($schedule, m=$m)" >&2; exit 1; }
    python3 - "$out" "$warmup" "$schedule" "$m" "$pp" "$v" "$load" <<'PY'
import json, statistics, sys
path, warmup, schedule, m, p, v, load = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
rows = [o for o in map(json.loads, open(path)) if "loss" in o and o["step"] > warmup]
bubble = statistics.median(o["pipeline_bubble"] for o in rows)
step_ms = statistics.median(o["step_ms"] for o in rows)
print(f"{schedule:<12} {m:>3} {(p - 1) / (v * m + p - 1):>8.3f} {bubble:>9.3f} {step_ms:>8.0f} {load:>6}")
PY
  done
done
