#!/usr/bin/env bash
# RL's packed rollouts (rl.pack_rollouts) against one rollout a row across the layouts and options they
# meet (CI runs a subset: tests/rl/grpo.sh and test_rl_packing): one GRPO iteration of a random tiny model
# (rows of 64 tokens, up to 24 new: any two rollouts pair) with an entropy bonus (so the update has a
# gradient at reward 0), packed and not; the rewards must be equal and the loss, gradient norm and entropy
# within 1e-4 relative, and the fill must rise. Prints a line per case ("ok" or "BAD") and exits 1 on a BAD.
#   tools/bench/rl/packing_matrix.sh            (ZT_BUILD_DIR, default build/)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${ZT_BUILD_DIR:-$root/build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
task=$root/inputs/rl_arith
work=$(mktemp -d /tmp/zt_packing_matrix.XXXXXX)
base=(--model.n_layer=2 --model.n_embd=64 --model.n_head=4 --model.vocab_size=257 --model.seq_len=64
      --data.vocab="$task/tokenizer.json" --rl.prompts="$task/prompts.jsonl" --rl.batch=4 --rl.group_size=4
      --rl.max_new_tokens=24 --rl.epochs=2 --train.micro_batch=2 --train.max_steps=1 --train.threads=1
      --ckpt.every=0 --train.seed=5 --rl.entropy_coeff=0.01)
llama="--model.arch=llama --model.n_kv_head=2"
cases=(
  "1|"
  "1|$llama"
  "2|$llama --parallel.tp=2"
  "2|$llama --parallel.tp=2 --parallel.sequence_parallel=true --train.zero_stage=3"
  "1|$llama --train.recompute=full"
  "1|--train.recompute=selective"
  "1|$llama --train.recompute=selective --train.precision=bf16"
  "1|--rl.algorithm=gspo --rl.loss_agg=seq-mean-token-mean"
  "2|--rl.algorithm=ppo --parallel.tp=2 $llama"
  "1|$llama --model.qkv_bias=true --rl.kl_coef=0.1"
  "2|$llama --model.tie_embeddings=false --train.loss_chunk=64 --train.zero_stage=3"
  "2|--rl.kl_coef=0.1 --train.zero_stage=3 --lora.rank=4 --lora.dropout=0.2"
  "1|--lora.rank=4 --lora.dropout=0.2 --lora.base_dtype=nf4 $llama"
)
bad=0
for c in "${cases[@]}"; do
  np=${c%%|*} extra=${c#*|}
  for pack in true false; do
    rm -rf "$work/ckpt-$pack"  # each case a new run (its final checkpoint is written)
    # shellcheck disable=SC2086  # extra holds several options
    mpirun -np "$np" "$build/bin/ztrain" "${base[@]}" $extra --rl.pack_rollouts=$pack --ckpt.dir="$work/ckpt-$pack" \
      --log.metrics="$work/$pack.jsonl" >"$work/$pack.log" 2>&1 </dev/null ||
      { echo "BAD $np rank(s) $extra: pack=$pack failed"; grep -m 3 -iE "error|refus|exit" "$work/$pack.log"; bad=1; continue 2; }
  done
  /usr/bin/python3 - "$np rank(s) $extra" "$work/true.jsonl" "$work/false.jsonl" <<'PY' || bad=1
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"accuracy"' in l][-1] for f in sys.argv[2:4])
worst = max(abs(a[k] - b[k]) / max(1.0, abs(b[k])) for k in ("loss", "grad_norm", "entropy"))
ok = worst < 1e-4 and a["reward_mean"] == b["reward_mean"] and a["update_fill"] > b["update_fill"]
print(f"{'ok ' if ok else 'BAD'} {sys.argv[1]:<95} worst {worst:.1e}  fill {b['update_fill']:.2f} -> {a['update_fill']:.2f}")
sys.exit(0 if ok else 1)
PY
  rm -f "$work"/*.jsonl
done
rm -rf "$work"
exit $bad
