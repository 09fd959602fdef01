// Causal scaled dot-product attention as cuDNN operation graphs over our packed tensors, forward
// (out and the softmax statistics) and backward (dq, dk, dv), lowered the way cudnn-frontend's
// sdpa / sdpa_backward nodes lower them for cuDNN 9 (matmuls, pointwise ops and reductions that the
// fused flash-attention engines recognise). Strided views of qkv [B,T,C + 2 NKV hs], out [B,T,C] and
// dqkv: no copies, no transposes.
//
// Statistics: cuDNN's Stats tensor, [B,NH,T,1] f32 with strides (NH T, T, 1, 1), is M + log(sum
// exp(S - M)) over the masked row of S = scale Q K^T, i.e. the natural-log log-sum-exp of the row:
// exactly backend.hpp's lse [B,NH,T] in the same memory layout. Our forward's lse feeds cuDNN's
// backward and cuDNN's Stats our native backward, unchanged.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <memory>

#include "backend/cuda/cudnn_graph.hpp"
#include "backend/cuda/sdpa_plan_cache.hpp"

namespace zt::backend::cuda::cudnn {

// The tensors a caller binds in the variant pack (the graph's virtual tensors get uids from 100 up).
enum SdpaUid : Uid {
  kQ = 1, kK, kV, kO, kStats, kScale, kNegInf, kOne,  // forward and backward inputs / outputs
  kDO, kDQ, kDK, kDV,                                  // backward
  kSoftmaxSum, kDQAccum,                               // backward scratch in the workspace
};

// A built plan and how its workspace is laid out: [dq_accum][softmax_sum][cuDNN's own], each part
// 256-byte aligned (cudnn-frontend puts its scratch tensors before the engine's workspace the same way).
struct SdpaPlan {
  GraphBuilder graph;  // the tensors and operations the plan was built from, kept with it
  ExecutionPlan exec;
  std::size_t softmax_sum_offset = 0;  // backward: rowsum(dO * O), B NH T f32
  std::size_t dq_accum_offset = 0;     // non-deterministic backward: f32 dQ accumulator
  bool has_dq_accum = false;
  bool zero_dq_accum = false;          // cuDNN before 9.6 expects the accumulator zeroed by the caller
  std::size_t engine_offset = 0;       // where cuDNN's own workspace starts
  std::size_t workspace_bytes = 0;     // all of it
  float neg_inf = 0.0f;                // the masked score: -inf, or the lowest float before cuDNN 9.10
};

// The forward or backward graph of key (SdpaKey::Pass): its tensors and operations, each finalised by
// cuDNN, which checks their shapes and dtypes (no device needed: the CPU-side tests build them).
GraphBuilder sdpa_graph(const SdpaKey& key);

// Builds the forward or backward plan of key on the handle's device; cudnn_version is
// cudnnGetVersion()'s. Throws zt::Error when cuDNN has no engine for it.
std::unique_ptr<SdpaPlan> build_sdpa_plan(cudnnHandle_t handle, const SdpaKey& key, int cudnn_version);

}  // namespace zt::backend::cuda::cudnn
