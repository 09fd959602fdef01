// The CUDA backend's memory side and construction: device selection, the compute stream, cuBLASLt and
// its workspace, the caching allocator, copies ordered on the stream; and make_cuda_backend.
#include <cuda_runtime_api.h>

#include "backend/cuda/attention.hpp"
#include "backend/cuda/check.hpp"
#include "backend/backend.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"

namespace zt::backend {
namespace cuda {
namespace {

// cuBLASLt's workspace: 32 MiB lets the heuristic pick split-K and stream-K kernels for GPT-2's
// GEMMs on Hopper (NVIDIA recommends at least 32 MiB there).
constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;

// The current device is per host thread: memory calls may come from other threads than the one that
// built the backend (a checkpoint writer freeing or copying buffers), so they select the device first.
// cudaSetDevice is a cheap no-op when it is already current.
void use_device(int device) { ZT_CUDA_CHECK(cudaSetDevice(device)); }

RawAllocator cuda_raw_allocator(int device) {
  return RawAllocator{[device](std::size_t bytes) -> void* {
                        use_device(device);
                        void* p = nullptr;
                        const cudaError_t rc = cudaMalloc(&p, bytes);
                        if (rc == cudaErrorMemoryAllocation) {
                          cudaGetLastError();  // not sticky: clear it so later launch checks do not see it
                          return nullptr;
                        }
                        ZT_CUDA_CHECK(rc);
                        return p;
                      },
                      [device](void* p) {
                        // Fails only when the context is already broken, which an earlier call reported;
                        // this runs in destructors, which must not throw.
                        if (cudaSetDevice(device) != cudaSuccess || cudaFree(p) != cudaSuccess) cudaGetLastError();
                      }};
}

}  // namespace

CudaBackend::CudaBackend(int device, const CudaBackendOptions& options)
    : device_(device), attention_(options.attention) {
  ZT_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  ZT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  device_name_ = cat("cuda:", device, " (", prop.name, ")");
  sm_ = prop.major * 10 + prop.minor;
  // Non-blocking: the legacy default stream (used by any library call we do not control) must not
  // serialise with our work.
  ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  stream_owner_.reset(stream_);
  allocator_ = std::make_unique<CachingAllocator>(cuda_raw_allocator(device), cat("cuda:", device));
  lt_workspace_ = allocate(kLtWorkspaceBytes);
  lt_ = std::make_unique<LtMatmul>(lt_workspace_.data(), lt_workspace_.bytes());
  open_cudnn(options);
}

// cuDNN is loaded and its handle made here, once: train.attention=cudnn fails now (exit 2, before any
// work) if it cannot run on this device; auto keeps the reason for the start-up line and runs natively.
void CudaBackend::open_cudnn(const CudaBackendOptions& options) {
  if (attention_ == AttentionImpl::kNative) return;
  try {
    cudnn_ = make_cudnn_attention(*this, attention_, sm_, options.deterministic_attention);
  } catch (const Error& e) {
    if (attention_ == AttentionImpl::kCudnn)
      throw ConfigError(cat("train.attention=cudnn: cuDNN's fused attention cannot run on ", device_name_, ": ", e.what(),
                            "; use train.attention=auto (native kernels where cuDNN cannot) or native"));
    cudnn_unavailable_ = e.what();
  }
}

CudaBackend::~CudaBackend() {
  // Queued work may still use the workspace and cached blocks: finish it before anything is freed.
  if (stream_ && cudaStreamSynchronize(stream_) != cudaSuccess) cudaGetLastError();
  cudnn_.reset();
  lt_.reset();
  lt_workspace_.reset();
  allocator_.reset();
}

std::string CudaBackend::name() const { return device_name_; }

Buffer CudaBackend::allocate(std::size_t bytes) {
  if (bytes == 0) return Buffer();
  return Buffer(this, allocator_->allocate(bytes), bytes);
}

void CudaBackend::release(void* data, std::size_t) { allocator_->release(data); }

void CudaBackend::copy_from_host(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  use_device(device_);
  // From pageable memory (every caller today) the call returns once the source has been staged, so the
  // caller may reuse it at once, while the device copy stays ordered on the stream without a host sync.
  // A pinned source is read later, when the stream gets there: keep it unchanged until synchronize().
  ZT_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  use_device(device_);
  ZT_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  ZT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the caller reads host_dst on return
}

void CudaBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  use_device(device_);
  ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::fill_zero(Tensor t) {
  if (t.bytes() == 0) return;
  use_device(device_);
  ZT_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.bytes(), stream_));
}

void CudaBackend::synchronize() {
  use_device(device_);
  ZT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

MemoryStats CudaBackend::memory_stats() const {
  const AllocatorStats s = allocator_->stats();
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();  // a reading, not a failure of the step
    free = total;
  }
  return MemoryStats{s.current_bytes, s.peak_bytes, s.reserved_bytes, total - free};
}

void CudaBackend::reset_peak() { allocator_->reset_peak(); }

// Attention: cuDNN's fused SDPA where it takes the call (cudnn_attention.hpp), else the native kernels
// of attention.cu. Either's workspace or scratch comes from the caching allocator and goes back right
// after the launch, which is safe on the single stream (caching_allocator.hpp). Both read and write
// the same lse, so a forward on one and a backward on the other agree.
void CudaBackend::attention_forward(Tensor out, Tensor lse, Tensor qkv, int n_head, Tensor segment_starts) {
  if (cudnn_ && cudnn_->forward(out, lse, qkv, n_head, segment_starts, stream_)) return;
  cuda::attention_forward(out, lse, qkv, n_head, stream_, segment_starts);
}

std::string CudaBackend::attention_summary(const AttentionQuery& q) const {
  const CudnnRuntime runtime = cudnn_ ? cudnn_->runtime() : CudnnRuntime{sm_, 0, true};
  return attention_choice(attention_, q, runtime, cudnn_unavailable_);
}

void CudaBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, int n_head,
                                     Tensor segment_starts) {
  if (cudnn_ && cudnn_->backward(dqkv, dout, qkv, out, lse, n_head, segment_starts, stream_)) return;
  ZT_CHECK(qkv.rank == 3 && out.rank == 3, "attention_backward: qkv [B,T,W] and out [B,T,C] must be 3-D, got ",
           qkv.shape_string(), " and ", out.shape_string());
  const std::size_t scratch_bytes = attention_backward_scratch_bytes(qkv.dim(0), qkv.dim(1), out.dim(2), n_head);
  Buffer scratch = allocate(scratch_bytes);
  cuda::attention_backward(dqkv, dout, qkv, out, lse, n_head, scratch.data(), scratch_bytes, stream_, segment_starts);
}

}  // namespace cuda

bool cuda_backend_built() { return true; }

std::unique_ptr<Backend> make_cuda_backend(int device, const CudaBackendOptions& options) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // "no driver" / "no device" is sticky until read
    throw ConfigError(cat("train.device=cuda: cannot use CUDA device ", device, ": ", cudaGetErrorString(rc),
                          " (no GPU or no driver on this node); use train.device=cpu"));
  }
  if (device < 0 || device >= count)
    throw ConfigError(cat("train.device=cuda: CUDA device ", device, " does not exist (this node has ", count,
                          " visible device", count == 1 ? "" : "s",
                          "); run at most that many ranks per node or check CUDA_VISIBLE_DEVICES"));
  return std::make_unique<cuda::CudaBackend>(device, options);
}

}  // namespace zt::backend
