// cuDNN's fused SDPA as the CUDA backend's attention (train.attention=auto|cudnn): per call, the support
// rule (attention_support.hpp) and pointer alignment decide; plans are built once per shape and cached
// (sdpa_plan_cache.hpp); the workspace comes from the backend's caching allocator; nothing synchronises
// the host. A call it does not take goes to the native kernels (attention.cu), which stay the fallback
// and the CPU-checked reference. No cuDNN types here: builds without cuDNN link cudnn_absent.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "backend/attention_support.hpp"
#include "backend/backend.hpp"

namespace zt::backend::cuda {

class CudnnAttention {
 public:
  virtual ~CudnnAttention() = default;
  virtual const CudnnRuntime& runtime() const = 0;

  // Queues the op through cuDNN and returns true, or returns false where the native kernels run it:
  // an empty shape, a malformed call (the native checks then say what is wrong), or one cuDNN does not
  // take under train.attention=auto (a failed plan build is logged once per shape). Under
  // train.attention=cudnn a call cuDNN does not take throws zt::Error saying why. Arguments as
  // Backend::attention_forward / attention_backward.
  virtual bool forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head,
                       const Tensor& segment_starts, cudaStream_t stream) = 0;
  virtual bool backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse,
                        int n_head, const Tensor& segment_starts, cudaStream_t stream) = 0;
};

// cuDNN on the calling thread's current device, of compute capability sm (major * 10 + minor); the
// workspace of each call is allocated from `memory` (the backend itself, which outlives this).
// deterministic: the backward's dP-workspace algorithm (bitwise repeatable) rather than atomics on dQ.
// Throws zt::Error saying why cuDNN cannot be used at all: this build has no cuDNN (cudnn_absent.cpp), or
// the device or cuDNN version is outside the support matrix. A build with cuDNN links libcudnn.so.9 (as
// it links NCCL): the loader needs it at start-up, CPU runs included (docs/guide/building-and-testing.md).
std::unique_ptr<CudnnAttention> make_cudnn_attention(Backend& memory, AttentionImpl impl, int sm, bool deterministic);

}  // namespace zt::backend::cuda
