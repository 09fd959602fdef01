#!/usr/bin/env bash
# An RL iteration's time split (issue 33): GRPO (or PPO) iterations of a model of the given shape (random init,
# byte-level vocabulary of inputs/rl_arith, so a response runs to rl.max_new_tokens as most responses of a
# real run do) on the synthetic task's prompts: per iteration the time generating (gen_s), scoring
# (reward_s) and updating (update_s), tokens per second per rank for generation and the update, and the
# allocator's peak against the memory plan's prediction (mem_predicted_bytes, which counts the rollouts'
# engine). The first iteration (start-up, cold pages) is left out of the means.
#
#   tools/bench/rl/run.sh [--shape "L C H"] [--seq-len T] [--new N] [--batch B] [--group G] [--micro M]
#       [--slots S] [--iterations I] [--ranks R] [--device cpu|cuda] [--precision fp32|bf16]
#       [--algorithm grpo|ppo] [--pack true|false] [--out DIR]
# Defaults: 4 layers, 256 wide, 4 heads; T 128, 96 new tokens, 16 prompts x 8 responses, micro-batch 32,
# 64 slots, 6 iterations, 1 rank, on the CPU in fp32, GRPO (PPO adds its critic's forward and step: the
# split then counts them in update_s), rollouts packed several a row in the update (rl.pack_rollouts; --pack
# false: one a row). ztrain from ZT_BUILD_DIR (default build/).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${ZT_BUILD_DIR:-$root/build}
shape="4 256 4" seq=128 new=96 batch=16 group=8 micro=32 slots=64 iterations=6 ranks=1 device=cpu precision=fp32 algorithm=grpo pack=true
out=$(mktemp -d /tmp/zt_bench_rl.XXXXXX)
usage() { echo "run.sh: $*" >&2; sed -n '10,16p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --shape) shape=$2; shift 2 ;;
    --seq-len) seq=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --group) group=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --algorithm) algorithm=$2; shift 2 ;;
    --pack) pack=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) usage "unknown option $1" ;;
  esac
done
read -r layers width heads <<<"$shape"
task=$root/inputs/rl_arith
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$out"
rm -rf "$out/ckpt" "$out/metrics.jsonl"
mpirun --oversubscribe -np "$ranks" "$build/bin/ztrain" --model.n_layer="$layers" --model.n_embd="$width" \
  --model.n_head="$heads" --model.vocab_size=257 --model.seq_len="$seq" --train.device="$device" \
  --train.precision="$precision" --data.vocab="$task/tokenizer.json" --rl.prompts="$task/prompts.jsonl" \
  --rl.algorithm="$algorithm" --rl.batch="$batch" --rl.group_size="$group" --rl.max_new_tokens="$new" --rl.slots="$slots" \
  --rl.pack_rollouts="$pack" \
  --train.micro_batch="$micro" --train.max_steps="$iterations" --ckpt.dir="$out/ckpt" --ckpt.every=0 \
  --log.metrics="$out/metrics.jsonl" >"$out/ztrain.log" 2>&1 || { tail -n 20 "$out/ztrain.log"; exit 1; }
/usr/bin/python3 - "$out/metrics.jsonl" "$shape" "$seq" "$new" "$batch" "$group" "$ranks" "$device" "$precision" "$algorithm" "$pack" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"accuracy"' in l][1:]
mean = lambda k: sum(r[k] for r in rows) / len(rows)
gen, rew, upd = mean("gen_s"), mean("reward_s"), mean("update_s")
total = gen + rew + upd
peak, pred = max(r["mem_peak_bytes"] for r in rows), rows[-1]["mem_predicted_bytes"]
print(f"shape (L C H) {sys.argv[2]}, T {sys.argv[3]}, {sys.argv[4]} new tokens, {sys.argv[5]} prompts x {sys.argv[6]}, "
      f"{sys.argv[7]} rank(s), {sys.argv[8]} {sys.argv[9]}, {sys.argv[10]}, rl.pack_rollouts={sys.argv[11]}; "
      f"{len(rows)} iterations after the first:")
print(f"| gen s | reward s | update s | gen share | gen tok/s/rank | update tok/s/rank | response len | update fill | peak MiB | plan MiB |")
print(f"|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
print(f"| {gen:.2f} | {rew:.4f} | {upd:.2f} | {gen / total:.0%} | {mean('gen_tokens_per_s'):.0f} | "
      f"{mean('train_tokens_per_s'):.0f} | {mean('response_length'):.1f} | {mean('update_fill'):.2f} | {peak / 2**20:.1f} | "
      f"{pred / 2**20:.1f} |")
PY
