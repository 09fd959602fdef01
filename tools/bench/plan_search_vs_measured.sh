#!/usr/bin/env bash
# The layout planner's predicted step time (`ztrain --plan --plan.search`, the "configured" line) against
# measured ms/step on CPU ranks (mpirun --oversubscribe), for layouts ztrain runs today: data parallel on
# 1, 2 and 4 ranks, parallel.tp 2 and 2 x 2, ZeRO stages, recompute, micro-batch sizes, and pipelines
# (pp 2 and 4, interleaved, pp x dp, pp x tp). Prints the table.
#   tools/bench/plan_search_vs_measured.sh [--warmup 2] [--steps 12] [--repeat 2] [--out DIR]
# Two predictions per layout, from the planner's own formulas (ztrain --plan --plan.search, predicted at
# two rates to split its compute term F / rate from its communication term):
#   A  one fit: plan.gpu_tflops fitted on the first layout (1 rank, compute only: its FLOPs over its
#      measured time), shared as cores / ranks when the ranks outnumber the cores (4 ranks on 2 cores get
#      half a core each: the planner's honest model of oversubscription);
#   B  one fit per rank count: the rate fitted on the first layout of each count (so the machine's share
#      for that many ranks is measured), which checks the communication, ZeRO, TP, recompute and
#      micro-batch terms on the others;
# links from `ztrain --preflight` on 2 and 4 ranks: plan.intra_node_gbps the all-reduce bus bandwidth at
# 4 MiB (the MPI host path), plan.link_latency_us the 64 KiB all-reduce's time (an upper bound).
# Measured: the fastest step after the warm-up over --repeat runs of the whole list, round-robin (this
# machine is shared: the fastest step is the one the other load disturbed least; the median of the
# first run is printed beside it).
# Model: GPT-2 n_layer 4, n_embd 128, n_head 4, seq_len 128, vocab 4096, global batch 16, fp32, 1 thread
# a rank. ZT_BENCH_MAX_LOAD=1 waits for a quiet machine before each run (tools/bench/wait_quiet.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/tools/bench/wait_quiet.sh"
build=${ZT_BUILD_DIR:-$root/build}
warmup=2 steps=12 repeat=2 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --warmup) warmup=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "plan_search_vs_measured.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for bin in "$build/bin/ztrain" "$build/tests/make_test_shards"; do
  [ -x "$bin" ] || { echo "plan_search_vs_measured.sh: $bin is missing: build it first (tools/build.sh)" >&2; exit 2; }
done
# Open MPI picks its shared-memory copy mechanism (CMA where the kernel allows it): the tests turn it
# off (containers often forbid process_vm_readv), but then a large send progresses only while its sender
# is inside MPI, which stalls a pipeline stage that computes after posting its send (pp2: bubble 0.49 and
# 188 ms/step without, 0.12 and 112 ms with CMA on this VM). Set OMPI_MCA_btl_vader_single_copy_mechanism
# yourself to choose.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -z "$out" ]; then
  out=$(mktemp -d /tmp/zt_plan_search.XXXXXX)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out/data"
"$build/tests/make_test_shards" "$out/data/train" --tokens 200000 --vocab 4096 --seed 1 >/dev/null
cores=$(nproc)
model=(--train.device=cpu --train.threads=1 --model.n_layer=4 --model.n_embd=128 --model.n_head=4 --model.seq_len=128
       --model.vocab_size=4096 --train.global_batch=16)

# A --preflight JSON field: the all-reduce's bus bandwidth at 4 MiB (bw) or time at 64 KiB (lat).
preflight() {  # np
  mpirun --oversubscribe -np "$1" "$build/bin/ztrain" "${model[@]}" --preflight --preflight.iters=5 \
    --preflight.max_mb=4 --preflight.min_fraction=0 2>/dev/null | grep '^{"event": "preflight"' || true
}
field() {  # json what
  python3 -c '
import json, statistics, sys
o = json.loads(sys.argv[1]); what = sys.argv[2]
ar = {c["bytes"]: c for c in o["collectives"] if c["op"] == "all_reduce"}
if what == "bw": print(max(1e-3, ar[max(ar)]["busbw_gbs"]) if ar else 1)
else: print(max(1.0, ar[min(ar)]["time_us"]) if ar else 1)' "$1" "$2"
}
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "calibrating the links (ztrain --preflight on 2 and 4 ranks) ..." >&2
declare -A bw lat
bw[1]=1 lat[1]=1  # one rank: no link
for np in 2 4; do
  j=$(preflight "$np")
  [ -n "$j" ] || { echo "plan_search_vs_measured.sh: ztrain --preflight on $np ranks printed no summary" >&2; exit 1; }
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
  "pp2 mb2                |2|--parallel.pp=2 --train.micro_batch=2"
  "pp2 vpp2 mb2           |2|--parallel.pp=2 --parallel.schedule=interleaved --parallel.vpp=2 --train.micro_batch=2"
  "pp4 mb2                |4|--parallel.pp=4 --train.micro_batch=2"
  "pp2 x dp2 mb2 zero1    |4|--parallel.pp=2 --train.micro_batch=2 --train.zero_stage=1"
  "pp2 x tp2 mb2          |4|--parallel.pp=2 --parallel.tp=2 --train.micro_batch=2"
)

predict() {  # np rate flags...: the planner's ms/step at plan.gpu_tflops=rate
  local np=$1 rate=$2; shift 2
  "$build/bin/ztrain" "${model[@]}" "$@" --plan --plan.search --plan.world_size="$np" --plan.gpus_per_node="$np" \
    --plan.gpu_tflops="$rate" --plan.compute_efficiency=1 --plan.intra_node_gbps="${bw[$np]}" \
    --plan.inter_node_gbps="${bw[$np]}" --plan.link_latency_us="${lat[$np]}" |
    sed -n 's/.*configured (.*): predicted \([0-9.]*\) ms\/step.*/\1/p'
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

declare -A best median
for ((pass = 1; pass <= repeat; pass++)); do
  for entry in "${layouts[@]}"; do
    IFS='|' read -r name np flags <<<"$entry"
    read -ra f <<<"$flags"
    wait_quiet >/dev/null
    echo "measuring $name on $np rank(s) (pass $pass of $repeat, load $(cut -d' ' -f1 /proc/loadavg)) ..." >&2
    read -r ms med < <(measure "$name" "$np" "${f[@]}")
    if [ -z "${best[$name]:-}" ]; then
      best[$name]=$ms median[$name]=$med
    else
      best[$name]=$(python3 -c "import sys; print(min(map(float, sys.argv[1:])))" "${best[$name]}" "$ms")
    fi
  done
done
rows=()
for entry in "${layouts[@]}"; do
  IFS='|' read -r name np flags <<<"$entry"
  read -ra f <<<"$flags"
  p1=$(predict "$np" 1 "${f[@]}")
  p2=$(predict "$np" 2 "${f[@]}")
  rows+=("$name|$np|$p1|$p2|${best[$name]}|${median[$name]}")
done
loads=$(cut -d' ' -f1-3 /proc/loadavg)

printf 'plan search vs measured: GPT-2 L=4 C=128 H=4 T=128 V=4096, global batch 16, fp32, 1 thread/rank, %s cores, fastest of %s x %s steps after %s warm-up; load average (1, 5, 15 min) %s at the start, %s at the end\n' \
  "$cores" "$repeat" "$steps" "$warmup" "$load_start" "$loads"
for np in 2 4; do
  printf 'links on %s ranks (--preflight): all-reduce %.3f GB/s at 4 MiB, %.0f us at 64 KiB\n' "$np" "${bw[$np]}" "${lat[$np]}"
done
python3 - "$cores" "${rows[@]}" <<'PY'
import sys
cores = int(sys.argv[1])
rows = []
for r in sys.argv[2:]:
    name, np, p1, p2, ms, med = r.split("|")
    p1, p2 = float(p1), float(p2)
    f = 2 * (p1 - p2)  # compute ms at 1 TFLOP/s; the rest does not scale with the rate
    rows.append(dict(name=name, np=int(np), f=f, comm=p1 - f, ms=float(ms), med=float(med)))
first = rows[0]
rate1 = first["f"] / (first["ms"] - first["comm"])
fit = {}
for r in rows:
    if r["np"] not in fit:
        fit[r["np"]] = r["f"] / max(1e-9, r["ms"] - r["comm"])
        r["fit"] = True
print(f"A: {rate1 * 1e3:.1f} GFLOP/s a rank fitted on the first row, x min(1, {cores} cores / ranks);"
      " B: fitted per rank count on its first row (fit), " +
      ", ".join(f"{n} rank(s) {v * 1e3:.1f} GFLOP/s" for n, v in fit.items()))
print(f"{'layout':<24} {'ranks':>5} {'A ms':>8} {'A err':>7} {'B ms':>8} {'B err':>7} {'measured':>9} {'median':>8}")
ea, eb = [], []
for i, r in enumerate(rows):
    a = r["f"] / (rate1 * min(1.0, cores / r["np"])) + r["comm"]
    b = r["f"] / fit[r["np"]] + r["comm"]
    da, db = (a - r["ms"]) / r["ms"], (b - r["ms"]) / r["ms"]
    if i > 0:
        ea.append(abs(da))
    if not r.get("fit"):
        eb.append(abs(db))
    bs = "(fit)" if r.get("fit") else f"{100 * db:+6.1f}%"
    as_ = "(fit)" if i == 0 else f"{100 * da:+6.1f}%"
    print(f"{r['name']:<24} {r['np']:>5} {a:8.1f} {as_:>7} {b:8.1f} {bs:>7} {r['ms']:9.1f} {r['med']:8.1f}")
print(f"mean |error| A {100 * sum(ea) / len(ea):.1f}% (max {100 * max(ea):.1f}%) over {len(ea)} predicted layouts; "
      f"B {100 * sum(eb) / len(eb):.1f}% (max {100 * max(eb):.1f}%) over {len(eb)}")
PY
