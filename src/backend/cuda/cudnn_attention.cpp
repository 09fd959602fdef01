// cuDNN's fused SDPA behind the CUDA backend's attention ops (cudnn_attention.hpp): the per-call
// decision, the plan cache, the variant pack (strided views into the packed qkv, out, dout and dqkv,
// lse as cuDNN's Stats) and the workspace, borrowed from the caching allocator for the one launch.
#include "backend/cuda/cudnn_attention.hpp"

#include <cudnn.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/cudnn_graph.hpp"
#include "backend/cuda/cudnn_sdpa.hpp"
#include "backend/cuda/sdpa_plan_cache.hpp"
#include "backend/op_checks.hpp"
#include "core/log.hpp"

namespace zt::backend::cuda {
namespace {

using cudnn::SdpaPlan;
using cudnn::Uid;

struct HandleDeleter {
  void operator()(cudnnContext* h) const { cudnnDestroy(h); }
};

// cuDNN's tensors are declared 16-byte aligned (cudnn_graph.cpp); a view that is not goes native.
constexpr std::uintptr_t kAlignment = 16;

class CudnnSdpa final : public CudnnAttention {
 public:
  CudnnSdpa(Backend& memory, AttentionImpl impl, int sm, bool deterministic) : memory_(memory), impl_(impl) {
    runtime_.sm = sm;
    runtime_.version = static_cast<int>(cudnnGetVersion());
    runtime_.deterministic = deterministic;
    if (std::string why = cudnn_runtime_refusal(runtime_); !why.empty()) throw Error(why);
    cudnnHandle_t h = nullptr;
    ZT_CUDNN_CHECK(cudnnCreate(&h));
    handle_.reset(h);
  }

  const CudnnRuntime& runtime() const override { return runtime_; }

  bool forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head, const Tensor& segment_starts,
               cudaStream_t stream) override {
    const char* op = "attention_forward";
    const AttentionDims d = check_attention_shapes(op, qkv, out, lse, n_head);
    if (d.B == 0 || d.T == 0 || out.dtype != qkv.dtype || lse.dtype != DType::kF32) return false;
    const SdpaKey key = key_of(SdpaKey::Pass::kForward, qkv.dtype, d, n_head);
    const SdpaPlan* plan = plan_for(op, key, !segment_starts.empty(), {qkv.data, out.data, lse.data});
    if (plan == nullptr) return false;
    std::byte* q = static_cast<std::byte*>(qkv.data);
    const std::size_t k_at = static_cast<std::size_t>(d.C) * dtype_size(qkv.dtype);
    const std::size_t v_at = k_at + static_cast<std::size_t>(key.NKV) * key.hs * dtype_size(qkv.dtype);
    float scale = 1.0f / std::sqrt(static_cast<float>(key.hs)), neg_inf = plan->neg_inf;
    Buffer workspace = memory_.allocate(plan->workspace_bytes);
    return run(op, key, *plan, workspace,
               {cudnn::kQ, cudnn::kK, cudnn::kV, cudnn::kO, cudnn::kStats, cudnn::kScale, cudnn::kNegInf},
               {q, q + k_at, q + v_at, out.data, lse.data, &scale, &neg_inf}, stream);
  }

  bool backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse,
                int n_head, const Tensor& segment_starts, cudaStream_t stream) override {
    const char* op = "attention_backward";
    const AttentionDims d = check_attention_shapes(op, qkv, out, lse, n_head);
    const bool same_dtypes = out.dtype == qkv.dtype && dout.dtype == qkv.dtype && dqkv.dtype == qkv.dtype;
    const bool same_shapes = dqkv.rank == 3 && dqkv.shape == qkv.shape && dout.rank == 3 && dout.shape == out.shape;
    if (d.B == 0 || d.T == 0 || !same_dtypes || !same_shapes || lse.dtype != DType::kF32) return false;
    const SdpaKey key = key_of(SdpaKey::Pass::kBackward, qkv.dtype, d, n_head);
    const SdpaPlan* plan =
        plan_for(op, key, !segment_starts.empty(), {qkv.data, out.data, lse.data, dout.data, dqkv.data});
    if (plan == nullptr) return false;
    const std::size_t k_at = static_cast<std::size_t>(d.C) * dtype_size(qkv.dtype);
    const std::size_t v_at = k_at + static_cast<std::size_t>(key.NKV) * key.hs * dtype_size(qkv.dtype);
    std::byte* q = static_cast<std::byte*>(qkv.data);
    std::byte* dq = static_cast<std::byte*>(dqkv.data);
    Buffer workspace = memory_.allocate(plan->workspace_bytes);
    std::byte* w = static_cast<std::byte*>(workspace.data());
    float scale = 1.0f / std::sqrt(static_cast<float>(key.hs)), neg_inf = plan->neg_inf, one = 1.0f;
    std::vector<Uid> uids = {cudnn::kQ,  cudnn::kK,  cudnn::kV,  cudnn::kO,  cudnn::kDO,         cudnn::kStats, cudnn::kDQ,
                             cudnn::kDK, cudnn::kDV, cudnn::kScale, cudnn::kNegInf, cudnn::kOne, cudnn::kSoftmaxSum};
    std::vector<void*> pointers = {q,       q + k_at, q + v_at, out.data, dout.data, lse.data, dq, dq + k_at, dq + v_at,
                                   &scale, &neg_inf, &one,     w + plan->softmax_sum_offset};
    if (plan->has_dq_accum) {
      uids.push_back(cudnn::kDQAccum);
      pointers.push_back(w + plan->dq_accum_offset);
      // Before cuDNN 9.6 the engine adds into the accumulator without zeroing it first.
      if (plan->zero_dq_accum)
        ZT_CUDA_CHECK(cudaMemsetAsync(w + plan->dq_accum_offset, 0,
                                      static_cast<std::size_t>(d.B * n_head * d.T) * key.hs * sizeof(float), stream));
    }
    return run(op, key, *plan, workspace, uids, pointers, stream);
  }

 private:
  SdpaKey key_of(SdpaKey::Pass pass, DType dtype, const AttentionDims& d, int n_head) const {
    SdpaKey k;
    k.pass = pass, k.dtype = dtype, k.B = d.B, k.T = d.T, k.NH = n_head, k.NKV = d.n_kv_head;
    k.hs = static_cast<int>(d.C / n_head);
    k.deterministic = pass == SdpaKey::Pass::kForward || runtime_.deterministic;  // the forward is either way
    return k;
  }

  // The plan for key, or null where the native kernels run the call (train.attention=auto).
  const SdpaPlan* plan_for(const char* op, const SdpaKey& key, bool document_mask,
                           std::initializer_list<const void*> pointers) {
    const AttentionQuery q{key.dtype, key.hs, key.NH, key.NKV, key.T, document_mask};
    std::string why = cudnn_attention_refusal(q, &runtime_);
    for (const void* p : pointers)
      if (why.empty() && reinterpret_cast<std::uintptr_t>(p) % kAlignment != 0)
        why = cat("a tensor at ", p, " is not ", kAlignment, "-byte aligned");
    if (!why.empty()) {
      if (impl_ == AttentionImpl::kCudnn)
        throw Error(cat(op, ": train.attention=cudnn, but cuDNN cannot run ", describe(key), ": ", why,
                        "; train.attention=auto runs such calls on the native kernels"));
      return nullptr;
    }
    const auto found = cache_.get(key, [&] { return cudnn::build_sdpa_plan(handle_.get(), key, runtime_.version); });
    if (const SdpaPlan* plan = found.entry.plan.get()) {
      if (found.built_now)
        log::debug(cat("cuDNN ", cudnn_version_string(runtime_.version), " SDPA ", describe(key), ": ", plan->exec.engine,
                       ", workspace ", plan->workspace_bytes, " bytes"));
      return plan;
    }
    if (impl_ == AttentionImpl::kCudnn)
      throw Error(cat(op, ": train.attention=cudnn, but cuDNN has no plan for ", describe(key), ": ",
                      found.entry.refusal, "; train.attention=auto runs such calls on the native kernels"));
    if (found.built_now)
      log::warn(cat(op, ": cuDNN has no plan for ", describe(key), " (", found.entry.refusal,
                    "); the native kernels run this shape"));
    return nullptr;
  }

  // Whether cuDNN ran the call. A plan that fails on its first execution is, under train.attention=auto,
  // a refusal from then on (said once; the native kernels run the shape), as cuBLASLt's matmuls fall back
  // (lt_matmul.cpp); under cudnn, or once the plan has run, the failure propagates.
  bool run(const char* op, const SdpaKey& key, const SdpaPlan& plan, const Buffer& workspace,
           const std::vector<Uid>& uids, const std::vector<void*>& pointers, cudaStream_t stream) {
    ZT_CUDNN_CHECK(cudnnSetStream(handle_.get(), stream));
    // The workspace goes back to the allocator when the caller's Buffer dies, right after this launch:
    // safe on the one compute stream, where the next user of the block queues behind it.
    std::byte* engine_workspace = static_cast<std::byte*>(workspace.data()) + plan.engine_offset;
    try {
      cudnn::execute(handle_.get(), plan.exec, uids, pointers, plan.exec.workspace_bytes > 0 ? engine_workspace : nullptr);
    } catch (const Error& e) {
      if (impl_ == AttentionImpl::kCudnn || !cache_.refuse_if_never_ran(key, e.what())) throw;
      log::warn(cat(op, ": cuDNN's plan for ", describe(key), " failed on its first run (", e.what(),
                    "); the native kernels run this shape"));
      return false;
    }
    cache_.mark_ran(key);
    return true;
  }

  Backend& memory_;
  AttentionImpl impl_;
  CudnnRuntime runtime_;
  std::unique_ptr<cudnnContext, HandleDeleter> handle_;
  SdpaPlanCache<SdpaPlan> cache_;
};

}  // namespace

std::unique_ptr<CudnnAttention> make_cudnn_attention(Backend& memory, AttentionImpl impl, int sm, bool deterministic) {
  return std::make_unique<CudnnSdpa>(memory, impl, sm, deterministic);
}

}  // namespace zt::backend::cuda
