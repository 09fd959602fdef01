#!/usr/bin/env bash
# Recomputation, optimizer offload and the ZeRO stages: peak memory saved and step time added, and the
# memory plan's predicted peak against the allocator's measured one.
#   tools/bench/memory_modes/run.sh [--device cuda] [--model 124m|350m] [STEPS]   (after tools/build.sh)
# CPU: one rank, 2 threads, GPT-2 with 4 layers, width 256, context 256, micro-batch 8. --device cuda:
# GPT-2 124M (or 350M: 24 x 1024, 16 heads) at T=1024, bf16, micro-batch 16. ZeRO-1 (offload needs a
# sharded optimizer) unless the variant names a stage; each variant trains STEPS steps (default 12)
# on synthetic shards; the median step_ms over steps 3.., the allocator's peak (mem_peak_bytes) and
# the plan's prediction (mem_predicted_bytes) are reported, and every recompute and stage variant's
# losses must equal the baseline's (bit-identical), else #wrong counts it (offload updates on the host:
# its losses are compared, not required equal).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
bin=${ZT_BUILD_DIR:-$root/build}
device=cpu model=124m
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    *) break ;;
  esac
done
steps=${1:-12}
work=$(mktemp -d /tmp/zt_bench_mm.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin/tests/make_test_shards" "$work/train" --tokens 2000000 --shard-tokens 1000000 --vocab 50257 --seed 1
if [ "$device" = cuda ]; then
  shape=(--model.n_layer=12 --model.n_head=12 --model.n_embd=768)
  [ "$model" = 350m ] && shape=(--model.n_layer=24 --model.n_head=16 --model.n_embd=1024)
  args=("${shape[@]}" --model.seq_len=1024 --train.device=cuda --train.precision=bf16 --train.micro_batch=16
        --train.global_batch=16)
  variants="none selective full offload stage0 stage3"
else
  args=(--model.n_layer=4 --model.n_head=4 --model.n_embd=256 --model.seq_len=256 --train.device=cpu --train.threads=2
        --train.micro_batch=8 --train.global_batch=8)
  variants="none selective full offload"
fi
args+=(--train.zero_stage=1 --train.max_steps="$steps" --log.every=1 --data.train="$work/train_*.h5" --ckpt.resume=none
       --ckpt.every=0)
for variant in $variants; do
  extra=(--train.recompute=none)
  case $variant in
    selective | full) extra=(--train.recompute="$variant") ;;
    offload) extra+=(--train.offload=optimizer) ;;
    stage*) extra+=(--train.zero_stage="${variant#stage}") ;;
  esac
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$bin/bin/ztrain" "${args[@]}" "${extra[@]}" \
    --ckpt.dir="$work/ck_$variant" --log.metrics="$work/$variant.jsonl" >/dev/null
done
python3 - "$work" "$device" $variants <<'PY'
import json, statistics, sys
work, device, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
def load(v):
    rows = [json.loads(l) for l in open(f"{work}/{v}.jsonl") if '"loss"' in l]
    return rows
base = load("none")
print(f"{'variant':<10} {'step_ms':>9} {'vs none':>8} {'peak MiB':>9} {'saved MiB':>10} {'plan MiB':>9} {'plan/peak':>9} "
      f"{'#wrong':>7} {'max rel loss diff':>17}")
out = {}
for v in variants:
    rows = load(v)
    ms = statistics.median(r["step_ms"] for r in rows[2:])
    peak = rows[-1]["mem_peak_bytes"] / 2**20
    plan = rows[-1].get("mem_predicted_bytes", 0) / 2**20
    diff = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(rows, base))
    wrong = 0 if v == "offload" else int([r["loss"] for r in rows] != [r["loss"] for r in base])
    b_ms = statistics.median(r["step_ms"] for r in base[2:]); b_peak = base[-1]["mem_peak_bytes"] / 2**20
    ratio = plan / peak if peak else 0
    print(f"{v:<10} {ms:9.1f} {ms / b_ms:7.2f}x {peak:9.1f} {b_peak - peak:10.1f} {plan:9.1f} {ratio:9.3f} {wrong:7d} {diff:17.1e}")
    out[v] = {"step_ms": round(ms, 2), "peak_mib": round(peak, 1), "plan_mib": round(plan, 1), "wrong": wrong,
              "max_rel_loss_diff": diff}
print(json.dumps({"bench": "memory_modes", "device": device, "steps": len(base), **out}))
PY
