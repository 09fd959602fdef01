#!/usr/bin/env bash
# The layout planner's predicted step time (`ztrain --plan --plan.search`, the "configured" line) against
# measured ms/step on CPU ranks (mpirun --oversubscribe), for layouts ztrain runs today: data parallel on
# 1, 2 and 4 ranks, parallel.tp 2 and 2 x 2, ZeRO stages, recompute, micro-batch sizes. Prints the table.
#   tools/bench/plan_search_vs_measured.sh [--warmup 2] [--steps 12] [--out DIR]
# Calibration, all measured here by this script with `ztrain --preflight` on the same number of ranks
# (all ranks at once, 1 thread each, so oversubscription, 4 ranks on 2 cores, and the machine's other
# load are in the numbers rather than modelled as cores / ranks):
#   plan.gpu_tflops       fitted on the first layout (1 rank, compute only: its FLOPs over its measured time),
#                         and on n ranks scaled by the median rank's fp32 GEMM rate (n=1024) on n ranks over
#                         that on 1 (plan.compute_efficiency stays 1: the fit is the achieved rate);
#   plan.intra_node_gbps  the all-reduce bus bandwidth at 4 MiB (the MPI host path; 1 rank: unused);
#   plan.link_latency_us  the time of the 64 KiB all-reduce (an upper bound on the per-message cost);
# Measured: the fastest step after the warm-up (this machine is shared: the fastest step is the one the
# other load disturbed least; the median is printed beside it).
# Model: GPT-2 n_layer 4, n_embd 128, n_head 4, seq_len 128, vocab 4096, global batch 16, fp32, 1 thread
# a rank. ZT_BENCH_MAX_LOAD=1 waits for a quiet machine before each run (tools/bench/wait_quiet.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/tools/bench/wait_quiet.sh"
build=${ZT_BUILD_DIR:-$root/build}
warmup=2 steps=12 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --warmup) warmup=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "plan_search_vs_measured.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for bin in "$build/bin/ztrain" "$build/tests/make_test_shards"; do
  [ -x "$bin" ] || { echo "plan_search_vs_measured.sh: $bin is missing: build it first (tools/build.sh)" >&2; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
if [ -z "$out" ]; then
  out=$(mktemp -d /tmp/zt_plan_search.XXXXXX)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out/data"
"$build/tests/make_test_shards" "$out/data/train" --tokens 200000 --vocab 4096 --seed 1 >/dev/null
cores=$(nproc)
model=(--train.device=cpu --train.threads=1 --model.n_layer=4 --model.n_embd=128 --model.n_head=4 --model.seq_len=128
       --model.vocab_size=4096 --train.global_batch=16)

# A --preflight JSON field: the median rank's GEMM flops, or the all-reduce's bus bandwidth at 4 MiB
# (bw) or time at 64 KiB (lat).
preflight() {  # np
  mpirun --oversubscribe -np "$1" "$build/bin/ztrain" "${model[@]}" --preflight --preflight.iters=5 \
    --preflight.max_mb=4 --preflight.min_fraction=0 2>/dev/null | grep '^{"event": "preflight"' || true
}
field() {  # json what
  python3 -c '
import json, statistics, sys
o = json.loads(sys.argv[1]); what = sys.argv[2]
ar = {c["bytes"]: c for c in o["collectives"] if c["op"] == "all_reduce"}
if what == "gemm": print(statistics.median(g["flops"] for g in o["gemm"]))
elif what == "bw": print(max(1e-3, ar[max(ar)]["busbw_gbs"]) if ar else 1)
else: print(max(1.0, ar[min(ar)]["time_us"]) if ar else 1)' "$1" "$2"
}
echo "calibrating (ztrain --preflight on 1, 2 and 4 ranks) ..." >&2
declare -A gemm bw lat
for np in 1 2 4; do
  j=$(preflight "$np")
  [ -n "$j" ] || { echo "plan_search_vs_measured.sh: ztrain --preflight on $np rank(s) printed no summary" >&2; exit 1; }
  gemm[$np]=$(field "$j" gemm)
  bw[$np]=$(field "$j" bw)
  lat[$np]=$(field "$j" lat)
done

# name | ranks | flags
layouts=(
  "dp1 mb4                |1|--train.micro_batch=4"
  "dp1 mb2 recompute=full |1|--train.micro_batch=2 --train.recompute=full"
  "dp2 mb4 zero0          |2|--train.micro_batch=4 --train.zero_stage=0"
  "dp2 mb2 zero2 selective|2|--train.micro_batch=2 --train.zero_stage=2 --train.recompute=selective"
  "tp2 mb4                |2|--parallel.tp=2 --train.micro_batch=4"
  "dp4 mb2 zero1          |4|--train.micro_batch=2 --train.zero_stage=1"
  "dp4 mb4 zero3          |4|--train.micro_batch=4 --train.zero_stage=3"
  "tp2 x dp2 mb2 zero1    |4|--parallel.tp=2 --train.micro_batch=2 --train.zero_stage=1"
)

predict() {  # np rate flags... (rate: the fitted TFLOP/s of one rank alone)
  local np=$1 rate=$2; shift 2
  "$build/bin/ztrain" "${model[@]}" "$@" --plan --plan.search --plan.world_size="$np" --plan.gpus_per_node="$np" \
    --plan.gpu_tflops="$(python3 -c "import sys; r, g, g1 = map(float, sys.argv[1:]); print(r * g / g1)" "$rate" "${gemm[$np]}" "${gemm[1]}")" \
    --plan.compute_efficiency=1 --plan.intra_node_gbps="${bw[$np]}" --plan.inter_node_gbps="${bw[$np]}" \
    --plan.link_latency_us="${lat[$np]}" | sed -n 's/.*configured (.*): predicted \([0-9.]*\) ms\/step.*/\1/p'
}
measure() {  # name np flags...
  local name=$1 np=$2; shift 2
  local tag=${name// /_}
  rm -rf "${out:?}/$tag.jsonl" "${out:?}/ckpt_$tag"  # metrics append and a checkpoint would be resumed
  mpirun --oversubscribe -np "$np" "$build/bin/ztrain" "${model[@]}" "$@" --train.max_steps=$((warmup + steps)) \
    --data.train="$out/data/train_*.h5" --log.every=1 --log.metrics="$out/$tag.jsonl" --ckpt.dir="$out/ckpt_$tag" \
    --ckpt.every=0 >"$out/$tag.log" 2>&1 || { tail -n 20 "$out/$tag.log" >&2; echo "ztrain failed ($name)" >&2; exit 1; }
  python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ms = [r["step_ms"] for r in rows if "step_ms" in r and r["step"] > int(sys.argv[2])]
print(min(ms), statistics.median(ms))' \
    "$out/$tag.jsonl" "$warmup"
}

rate=""
rows=()
for entry in "${layouts[@]}"; do
  IFS='|' read -r name np flags <<<"$entry"
  read -ra f <<<"$flags"
  load=$(wait_quiet)
  echo "measuring $name on $np rank(s) ..." >&2
  read -r ms med < <(measure "$name" "$np" "${f[@]}")
  if [ -z "$rate" ]; then  # the first layout fits the rate: at 1 TFLOP/s it is predicted p ms, so rate = p / measured
    p1=$(predict "$np" 1 "${f[@]}")
    rate=$(python3 -c "import sys; print(float(sys.argv[1]) / float(sys.argv[2]))" "$p1" "$ms")
  fi
  pred=$(predict "$np" "$rate" "${f[@]}")
  rows+=("$name|$np|$pred|$ms|$load|$med")
done

printf 'plan search vs measured: GPT-2 L=4 C=128 H=4 T=128 V=4096, global batch 16, fp32, 1 thread/rank, %s cores, fastest of %s steps after %s warm-up\n' \
  "$cores" "$steps" "$warmup"
for np in 1 2 4; do
  python3 -c '
import sys
np, g, bw, lat, cores = sys.argv[1:]
link = f", all-reduce {float(bw):.3f} GB/s, {float(lat):.0f} us at 64 KiB" if np != "1" else ""
over = f" (oversubscribed: {np} ranks on {cores} cores)" if int(np) > int(cores) else ""
print(f"calibration on {np} rank(s){over}: GEMM {float(g) / 1e9:.1f} GFLOP/s a rank{link} (--preflight)")' \
    "$np" "${gemm[$np]}" "${bw[$np]}" "${lat[$np]}" "$cores"
done
python3 -c "import sys; print(f'fitted rate of one rank alone: {float(sys.argv[1]) * 1e3:.1f} GFLOP/s (the first row: its FLOPs over its measured time)')" "$rate"
printf '%-24s %5s %13s %12s %8s %11s %6s\n' layout ranks "predicted ms" "measured ms" error "(median)" load
for r in "${rows[@]}"; do
  IFS='|' read -r name np pred ms load med <<<"$r"
  python3 -c '
import sys
name, np, pred, ms, load, med = sys.argv[1:]
p, m = float(pred), float(ms)
print(f"{name:<24} {np:>5} {p:13.1f} {m:12.1f} {100 * (p - m) / m:+7.1f}% {float(med):11.1f} {load:>6}")' \
    "$name" "$np" "$pred" "$ms" "$load" "$med"
done
python3 -c '
import sys
errs = [abs(float(p) - float(m)) / float(m) for p, m in (r.split("|")[2:4] for r in sys.argv[1:])]
print(f"mean |error| {100 * sum(errs) / len(errs):.1f}% over {len(errs)} layouts (the first fits the rate), max {100 * max(errs):.1f}%")' "${rows[@]}"
