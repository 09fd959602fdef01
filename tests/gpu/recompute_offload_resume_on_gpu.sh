#!/usr/bin/env bash
# The memory modes and the checkpoint on the CUDA backend, beyond GPT-2's (training_matches_cpu.sh): the
# kernels are deterministic (no atomics feed the weights), so recomputation reruns the same kernels on
# the same inputs and gives the same bits, and a checkpoint written from the GPU resumes to the
# uninterrupted run's bits. A grouped-query Llama (llama3 RoPE, bf16): selective and full recomputation
# bit-identical to none; stopped at step 10 and resumed at ZeRO-3 (sharded parameters and optimizer
# state), bit-identical; optimizer offload (host AdamW) within fp32 rounding of the on-GPU optimizer.
# GPT-2: selective recomputation within bf16 rounding (c_fc's GELU runs inside its GEMM, with one rounding
# less, except under selective recomputation, which rebuilds the GELU alone: model/model.hpp). LoRA over the Llama (dropout 0.1: the mask stream's
# position is part of the state): stopped and resumed at ZeRO-1, bit-identical.
# Skips (exit 77) without a CUDA backend or a visible GPU.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
source "$here/../ckpt/ckpt_lib.sh"  # make_tiny_data, same_losses, close_losses

require_cuda
make_tiny_data
LLAMA=(--model.arch=llama --model.n_layer=2 --model.n_head=4 --model.n_kv_head=2 --model.n_embd=128
       --model.rope_theta=10000 --model.rope_scaling=llama3 --model.rope_original_max_position=8)
GPT2=(--model.n_layer=2 --model.n_head=3 --model.n_embd=96)
LORA=("${LLAMA[@]}" --lora.rank=8 --lora.alpha=16 --lora.targets=q,k,v,o,gate,up,down --lora.dropout=0.1)
common=(--model.vocab_size=97 --model.seq_len=16 --optim.lr=3e-3 --optim.warmup_steps=2 --log.every=1
        --train.max_steps=20 --train.global_batch=8 --train.micro_batch=4 --data.shuffle=true --optim.grad_clip=1.0
        --train.device=cuda --train.precision=bf16 "$(tiny_data_args)")
run() {  # run NAME ARGS...: one rank on the GPU; metrics in NAME.jsonl, checkpoints in ck_NAME
  local name=$1; shift
  expect_exit 0 zt_mpirun 1 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/ck_$name" \
    --log.metrics="$ZT_WORK/$name.jsonl" "$@"
}
# stop_and_resume NAME BASE ARGS...: NAME stops at step 10 with a checkpoint, resumes, and the joined
# curve equals BASE's (an uninterrupted run with ARGS) bit for bit.
stop_and_resume() {
  local name=$1 base=$2; shift 2
  run "$name" --ckpt.every=0 --ckpt.resume=none --train.stop_at_step=10 "$@"
  run "${name}_resumed" --ckpt.every=0 --ckpt.resume=auto --ckpt.dir="$ZT_WORK/ck_$name" "$@"
  expect_in "$ZT_WORK/out" "resumed from .*step_00000010"
  cat "$ZT_WORK/$name.jsonl" "$ZT_WORK/${name}_resumed.jsonl" >"$ZT_WORK/${name}_joined.jsonl"
  same_losses "$ZT_WORK/$base.jsonl" "$ZT_WORK/${name}_joined.jsonl"
}
fresh=(--ckpt.every=0 --ckpt.resume=none)

run llama_s0 "${LLAMA[@]}" "${fresh[@]}"
for mode in selective full; do
  run "llama_$mode" "${LLAMA[@]}" "${fresh[@]}" --train.recompute=$mode
  same_losses "$ZT_WORK/llama_s0.jsonl" "$ZT_WORK/llama_$mode.jsonl"
  echo "Llama bf16: recompute=$mode is bit-identical to none"
done
run llama_s3 "${LLAMA[@]}" "${fresh[@]}" --train.zero_stage=3
stop_and_resume llama_s3_split llama_s3 "${LLAMA[@]}" --train.zero_stage=3
echo "Llama bf16 ZeRO-3: stopped at step 10 and resumed, bit-identical to the uninterrupted run"
run llama_s1 "${LLAMA[@]}" "${fresh[@]}" --train.zero_stage=1
run llama_offload "${LLAMA[@]}" "${fresh[@]}" --train.zero_stage=1 --train.offload=optimizer
close_losses "$ZT_WORK/llama_s1.jsonl" "$ZT_WORK/llama_offload.jsonl" 1e-3
echo "Llama bf16: optimizer offload follows the on-GPU optimizer within 1e-3"

run gpt2_s0 "${GPT2[@]}" "${fresh[@]}"
run gpt2_selective "${GPT2[@]}" "${fresh[@]}" --train.recompute=selective
close_losses "$ZT_WORK/gpt2_s0.jsonl" "$ZT_WORK/gpt2_selective.jsonl" 5e-3
echo "GPT-2 bf16: recompute=selective follows none within bf16 rounding (the GELU outside its GEMM)"

run lora_s1 "${LORA[@]}" "${fresh[@]}" --train.zero_stage=1
stop_and_resume lora_split lora_s1 "${LORA[@]}" --train.zero_stage=1
echo "LoRA over Llama bf16 ZeRO-1: stopped at step 10 and resumed, bit-identical"
echo "PASS"
