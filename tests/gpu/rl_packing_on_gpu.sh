#!/usr/bin/env bash
# RL on the CUDA backend (issue 30's "every GPU path run", issue 33): GRPO iterations of a random GPT-2 and
# a Llama (GQA, RoPE) with rollouts packed several to a row (rl.pack_rollouts: the document mask in the
# native attention kernels, the position table's and RoPE's backward at restarted positions) give one
# rollout a row's figures within fp32 rounding, on the GPU; a LoRA actor with dropout too; and bf16 runs.
# The rollouts are sampled on the GPU before any update and do not depend on the packing, so iteration 1's
# rewards are equal and its loss, gradient norm and entropy close. Skips (exit 77) without a GPU.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
require_cuda
task=$ZT_SOURCE/inputs/rl_arith
W=$ZT_WORK
common=(--model.n_layer=2 --model.n_embd=64 --model.n_head=4 --model.vocab_size=257 --model.seq_len=64
        --data.vocab="$task/tokenizer.json" --rl.prompts="$task/prompts.jsonl" --rl.batch=4 --rl.group_size=4
        --rl.epochs=2 --rl.entropy_coeff=0.01 --train.micro_batch=1 --train.max_steps=1
        --ckpt.every=0 --train.seed=5 --train.device=cuda --dist.backend=nccl)
# Up to 30 new tokens: two long rollouts overfill a row, one ended early pairs; up to 24: any two pair.
gpt2=("${common[@]}" --rl.max_new_tokens=30)
llama=("${common[@]}" --rl.max_new_tokens=24 --model.arch=llama --model.n_kv_head=2)
close() {  # A B: iteration 1 of A (packed) and B (one a row): same rewards, loss/grad_norm/entropy within TOL
  python3 - "$@" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"accuracy"' in l][0] for f in sys.argv[1:3])
tol = float(sys.argv[3])
for k in ("reward_mean", "response_length"):
    assert a[k] == b[k], (k, a[k], b[k])
for k in ("loss", "grad_norm", "entropy"):
    assert abs(a[k] - b[k]) <= tol * max(1.0, abs(b[k])), (k, a[k], b[k])
assert a["update_fill"] > b["update_fill"], ("no rollouts were packed", a["update_fill"], b["update_fill"])
print(f"ok: {sys.argv[1].split('/')[-1]} = {sys.argv[2].split('/')[-1]} within {tol}; update_fill {b['update_fill']:.2f} -> {a['update_fill']:.2f}")
PY
}
for model in gpt2 llama; do
  declare -n args=$model
  expect_exit 0 "$ZT_BIN/ztrain" "${args[@]}" --ckpt.dir="$W/$model-packed" --log.metrics="$W/$model-packed.jsonl"
  expect_exit 0 "$ZT_BIN/ztrain" "${args[@]}" --rl.pack_rollouts=false --ckpt.dir="$W/$model-rows" --log.metrics="$W/$model-rows.jsonl"
  close "$W/$model-packed.jsonl" "$W/$model-rows.jsonl" 1e-4 || fail "$model: packed rollouts on the GPU differ from one a row (above)"
  lora=(--lora.rank=4 --lora.dropout=0.3 --optim.lr=1e-2)
  expect_exit 0 "$ZT_BIN/ztrain" "${args[@]}" "${lora[@]}" --ckpt.dir="$W/$model-lp" --log.metrics="$W/$model-lp.jsonl"
  expect_exit 0 "$ZT_BIN/ztrain" "${args[@]}" "${lora[@]}" --rl.pack_rollouts=false --ckpt.dir="$W/$model-lr" \
    --log.metrics="$W/$model-lr.jsonl"
  close "$W/$model-lp.jsonl" "$W/$model-lr.jsonl" 1e-4 || fail "$model: a packed LoRA actor with dropout on the GPU differs (above)"
  expect_exit 0 "$ZT_BIN/ztrain" "${args[@]}" --train.precision=bf16 --ckpt.dir="$W/$model-bf16" --log.metrics="$W/$model-bf16.jsonl"
  expect_in "$W/$model-bf16.jsonl" '"update_fill": ' "$model in bf16 on the GPU ran no RL iteration"
done
echo "PASS: packed rollouts on the GPU (GPT-2, Llama; LoRA with dropout; bf16)"
