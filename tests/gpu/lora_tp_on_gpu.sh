#!/usr/bin/env bash
# LoRA under parallel.tp on the CUDA backend: two ranks sharing the GPU through host-staged MPI
# (dist.backend=mpi) train adapters on every module of a tiny GPT-2 and a grouped-query Llama with
# lora.dropout=0.1 at tp=2 (ZeRO 0, and 3 with sequence parallelism), following the CPU backend's
# one-rank LoRA curve within 1e-4 relative over 6 steps (fp32; other summation orders): the adapters'
# partial sums, the TP group's reduction of the replicated factors' gradients (device memory) and the
# strided dropout masks on the row-parallel inputs. Skips (exit 77) without a CUDA backend or a visible GPU.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
source "$here/../ckpt/ckpt_lib.sh"  # make_tiny_data, close_losses
source "$here/../mpi/parallel_lib.sh"  # gpu_tp2_follows_cpu, llama

require_cuda
common=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=4 --train.micro_batch=2 --train.max_steps=6
        --data.shuffle=true --optim.grad_clip=0.5 --ckpt.every=0 --ckpt.overwrite=true --ckpt.resume=none
        --lora.rank=4 --lora.alpha=8 --lora.dropout=0.1)
for family in gpt2 llama; do
  arch=(--lora.targets=c_attn,c_proj,c_fc)
  [ $family = llama ] && arch=("${llama[@]}" --lora.targets=q,k,v,o,gate,up,down)
  gpu_tp2_follows_cpu "$family" "${arch[@]}"
  echo "$family: LoRA at tp=2 on the GPU follows the CPU's one-rank curve within 1e-4 (ZeRO 0; ZeRO 3 with SP)"
done
echo "PASS"
