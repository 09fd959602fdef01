#!/usr/bin/env bash
# Recomputation and optimizer offload: peak memory saved and step time added, on the CPU backend.
#   tools/bench/memory_modes/run.sh [STEPS]      (after tools/build.sh)
# One rank, 2 threads, GPT-2 with 4 layers, width 256, context 256, micro-batch 8, ZeRO-1 (offload
# needs a sharded optimizer); each variant trains STEPS steps (default 12) on synthetic shards; the
# median step_ms over steps 3.. and the allocator's peak (mem_peak_bytes) are reported, and every
# variant's losses must equal the baseline's (bit-identical), else #wrong counts the variant.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
bin=${ZT_BUILD_DIR:-$root/build}
steps=${1:-12}
work=$(mktemp -d /tmp/zt_bench_mm.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin/tests/make_test_shards" "$work/train" --tokens 2000000 --shard-tokens 1000000 --vocab 50257 --seed 1
args=(--model.n_layer=4 --model.n_head=4 --model.n_embd=256 --model.seq_len=256 --train.device=cpu --train.threads=2
      --train.micro_batch=8 --train.global_batch=8 --train.zero_stage=1 --train.max_steps="$steps" --log.every=1
      --data.train="$work/train_*.h5" --ckpt.resume=none --ckpt.every=0)
for variant in none selective full offload; do
  extra=(--train.recompute=none)
  case $variant in selective | full) extra=(--train.recompute=$variant) ;; offload) extra+=(--train.offload=optimizer) ;; esac
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$bin/bin/ztrain" "${args[@]}" "${extra[@]}" \
    --ckpt.dir="$work/ck_$variant" --log.metrics="$work/$variant.jsonl" >/dev/null
done
/usr/bin/python3 - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
def load(v):
    rows = [json.loads(l) for l in open(f"{work}/{v}.jsonl") if '"loss"' in l]
    return rows
base = load("none")
print(f"{'variant':<10} {'step_ms':>9} {'vs none':>8} {'peak MiB':>9} {'saved MiB':>10} {'#wrong':>7}")
out = {}
for v in ("none", "selective", "full", "offload"):
    rows = load(v)
    ms = statistics.median(r["step_ms"] for r in rows[2:])
    peak = rows[-1]["mem_peak_bytes"] / 2**20
    wrong = int([r["loss"] for r in rows] != [r["loss"] for r in base])
    b_ms = statistics.median(r["step_ms"] for r in base[2:]); b_peak = base[-1]["mem_peak_bytes"] / 2**20
    print(f"{v:<10} {ms:9.1f} {ms / b_ms:7.2f}x {peak:9.1f} {b_peak - peak:10.1f} {wrong:7d}")
    out[v] = {"step_ms": round(ms, 2), "peak_mib": round(peak, 1), "wrong": wrong}
print(json.dumps({"bench": "memory_modes", "steps": len(base), **out}))
PY
