// Causal flash attention (Dao et al. 2022, FlashAttention-2 loop order) on the compute stream: the
// softmax is never stored; forward keeps only the per-row log-sum-exp, backward rebuilds each
// probability tile from it. No O(T^2) buffer at any T. Tensors per backend.hpp's attention ops
// (qkv [B,T,W] with W = C + 2 NKV hs, 3C for multi-head; out [B,T,C] in the same dtype: f32, bf16 or
// f16; lse [B,NH,T] f32).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "backend/tensor.hpp"

namespace zt::backend::cuda {

// segment_starts: [B,T] i32 on the device (backend.hpp's document mask), or empty.
void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head, cudaStream_t stream,
                       const Tensor& segment_starts = Tensor());

// Scratch the backward pass needs (row terms D = rowsum(dO * O), fp32 dQ accumulators, ...), in bytes,
// for these shapes; the backend allocates it from its caching allocator and passes it in.
std::size_t attention_backward_scratch_bytes(std::int64_t B, std::int64_t T, std::int64_t C, int n_head);

// dqkv [B,T,W] written (same dtype as qkv; dK/dV summed over each K/V head's query group).
void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                        const Tensor& lse, int n_head, void* scratch, std::size_t scratch_bytes,
                        cudaStream_t stream, const Tensor& segment_starts = Tensor());

}  // namespace zt::backend::cuda
