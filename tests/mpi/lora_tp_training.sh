#!/usr/bin/env bash
# LoRA under tensor parallelism follows one rank's LoRA run (1e-5 relative on the losses, gradient norms
# and validation losses, 6 steps, lora.dropout=0.1 so the masks must be the same on every layout, the
# gradient clipping acting): GPT-2 (c_attn, both c_proj, c_fc: fused q|k|v, both row-parallel
# projections) at tp=2 (ZeRO 0) and at tp=2 x dp=2 with sequence parallelism (ZeRO 3); Llama (every
# module: q, k, v and gate, up inside the fused projections, GQA) at tp=2 x dp=2 with SP (ZeRO 1). The
# adapters each run exports (PEFT's adapter_model.safetensors, from the global-shape checkpoint) hold the
# same tensors (1e-4), a tp=2
# checkpoint resumes at tp=1 on the one-rank curve and a one-rank checkpoint at tp=2, and the memory plan
# bounds the tp=2 runs' peaks (never below, at most 10% above); GPT-2 at pp=2 x tp=2 with SP follows the same curve.
# More layouts: tools/bench/parallel/matrix.sh tensor lora (and pptp lora).
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/parallel_lib.sh"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "numpy not importable by /usr/bin/python3: the adapter comparison needs it"
make_tiny_data 20000
common=("${TINY_MODEL[@]}" "$(tiny_data_args)" --data.valid="$ZT_WORK/data/valid_*.h5" --log.eval_every=3
        --log.eval_batches=1 --train.global_batch=4 --train.micro_batch=1 --train.max_steps=6
        --data.shuffle=true --optim.grad_clip=0.5 --optim.lr=1e-2 --ckpt.every=3 --ckpt.keep=3 --ckpt.overwrite=true
        --lora.rank=4 --lora.alpha=32 --lora.dropout=0.1)
gpt2_lora=(--lora.targets=c_attn,c_proj,c_fc)
llama_lora=("${llama[@]}" --lora.targets=q,k,v,o,gate,up,down)

# adapters RUN: zckpt's PEFT export of RUN's last checkpoint into $ZT_WORK/RUN.adapter/.
adapters() {
  expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/$1.ckpt/step_00000006" --adapter "$ZT_WORK/$1.adapter"
}
# plan_is_peak RUN: the plan's prediction is never below the measured peak and at most 10% above it
# (metrics of RUN's last step; at ZeRO-3 the frozen base's gather buffers are counted as the engine keeps
# them, and the adapters' gradients in flight at their most).
plan_is_peak() {
  /usr/bin/python3 - "$ZT_WORK/$1.jsonl" "$1" <<'PY' || fail "$1: the memory plan is below the measured peak or 10% above it"
import json, sys
last = [r for r in map(json.loads, open(sys.argv[1])) if "mem_peak_bytes" in r][-1]
ratio = last["mem_predicted_bytes"] / last["mem_peak_bytes"]
print(f"{sys.argv[2]}: predicted {last['mem_predicted_bytes']} / measured peak {last['mem_peak_bytes']} = {ratio:.3f}")
sys.exit(0 if 1 <= ratio <= 1.10 else 1)
PY
}

run gpt2_ref 1 --ckpt.resume=none "${gpt2_lora[@]}"
expect_in "$ZT_WORK/out" "LoRA: rank 4"
run gpt2_tp2 2 --ckpt.resume=none "${gpt2_lora[@]}" --parallel.tp=2 --train.zero_stage=0
expect_in "$ZT_WORK/out" "2 rank\(s\) = parallel.tp 2 x 1 data-parallel"
same_curve gpt2_ref gpt2_tp2
plan_is_peak gpt2_tp2
run gpt2_sp 4 --ckpt.resume=none "${gpt2_lora[@]}" --parallel.tp=2 --parallel.sequence_parallel=true --train.zero_stage=3
expect_in "$ZT_WORK/gpt2_sp.jsonl" "\"val_loss\""
same_curve gpt2_ref gpt2_sp
plan_is_peak gpt2_sp
for r in gpt2_ref gpt2_tp2 gpt2_sp; do adapters $r; done
same_weights "$ZT_WORK/gpt2_ref.adapter/adapter_model.safetensors" "$ZT_WORK/gpt2_tp2.adapter/adapter_model.safetensors" "tp=2"
same_weights "$ZT_WORK/gpt2_ref.adapter/adapter_model.safetensors" "$ZT_WORK/gpt2_sp.adapter/adapter_model.safetensors" "tp=2 SP"
cmp "$ZT_WORK/gpt2_ref.adapter/adapter_config.json" "$ZT_WORK/gpt2_sp.adapter/adapter_config.json" ||
  fail "adapter_config.json depends on the layout"

# With a pipeline too: pp=2 x tp=2 with SP (each rank its stage's adapters' TP shard).
run gpt2_pptp 4 --ckpt.resume=none "${gpt2_lora[@]}" --parallel.pp=2 --parallel.tp=2 --parallel.sequence_parallel=true
same_curve gpt2_ref gpt2_pptp
plan_is_peak gpt2_pptp
adapters gpt2_pptp
same_weights "$ZT_WORK/gpt2_ref.adapter/adapter_model.safetensors" "$ZT_WORK/gpt2_pptp.adapter/adapter_model.safetensors" "pp=2 x tp=2"

# A tp=2 x dp=2 SP checkpoint (ZeRO 3) at step 3 resumes on one rank and continues the one-rank curve.
run_resumed to_tp1 1 gpt2_sp 3 "${gpt2_lora[@]}"
same_curve gpt2_ref to_tp1 4
# ... and a one-rank checkpoint at step 3 resumes at tp=2 on the same curve.
run_resumed to_tp2 2 gpt2_ref 3 "${gpt2_lora[@]}" --parallel.tp=2
same_curve gpt2_ref to_tp2 4

run llama_ref 1 --ckpt.resume=none "${llama_lora[@]}"
run llama_sp 4 --ckpt.resume=none "${llama_lora[@]}" --parallel.tp=2 --parallel.sequence_parallel=true --train.zero_stage=1
same_curve llama_ref llama_sp
plan_is_peak llama_sp
for r in llama_ref llama_sp; do adapters $r; done
same_weights "$ZT_WORK/llama_ref.adapter/adapter_model.safetensors" "$ZT_WORK/llama_sp.adapter/adapter_model.safetensors" "Llama tp=2 SP"
echo "PASS"
