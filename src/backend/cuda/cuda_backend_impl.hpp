// The CUDA backend's class (internal to backend/cuda): one device, one non-blocking compute stream that
// every op and copy is queued on, a cuBLASLt handle with its workspace, and the caching allocator. The
// ops are defined one family per file (embedding.cu, layernorm.cu, matmul.cu, ...), as on the CPU.
// Ops launch on the calling thread's current device, which the constructor set: call them from the
// thread that built the backend. Memory calls (allocate, release, copies) select the device
// themselves and may come from any thread.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/caching_allocator.hpp"
#include "backend/cuda/cudnn_attention.hpp"
#include "backend/cuda/lt_matmul.hpp"

namespace zt::backend::cuda {

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, const CudaBackendOptions& options);
  ~CudaBackend() override;
  std::string name() const override;

  Buffer allocate(std::size_t bytes) override;
  void release(void* data, std::size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill_zero(Tensor t) override;
  void synchronize() override;
  MemoryStats memory_stats() const override;
  void reset_peak() override;
  void* stream() const override { return stream_; }

  // The allocator's own numbers (reserved and cached bytes, raw allocation count) and its cache flush.
  AllocatorStats allocator_stats() const { return allocator_->stats(); }
  void empty_cache() { allocator_->empty_cache(); }
  // The fused GEMM epilogues cuBLASLt refused on this device so far (the ops ran unfused), one line each.
  const std::vector<std::string>& refused_epilogues() const { return lt_->refused(); }

  void embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, Tensor positions = Tensor()) override;
  void embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens, Tensor positions = Tensor()) override;
  void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias) override;
  void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                          Tensor mean, Tensor rstd) override;
  void add_layernorm_forward(Tensor res, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b, Tensor weight,
                             Tensor bias) override;
  void layernorm_backward_accumulate(Tensor dres, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                                     Tensor mean, Tensor rstd) override;
  void matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, WeightLayout layout) override;
  void matmul_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                       WeightLayout layout) override;
  void matmul_backward_input_accumulate(Tensor dinp, Tensor dout, Tensor weight, WeightLayout layout) override;
  void matmul_gelu_forward(Tensor out, Tensor pre, Tensor inp, Tensor weight, Tensor bias,
                           WeightLayout layout) override;
  void matmul_dgelu_backward(Tensor dpre, Tensor dbias_pre, Tensor dout, Tensor weight, Tensor pre,
                             WeightLayout layout) override;
  void attention_forward(Tensor out, Tensor lse, Tensor qkv, int n_head, Tensor segment_starts = Tensor()) override;
  void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, int n_head,
                          Tensor segment_starts = Tensor()) override;
  std::string attention_summary(const AttentionQuery& q) const override;
  void attention_cached_forward(Tensor out, Tensor qkv, Tensor k_cache, Tensor v_cache, Tensor slots, Tensor positions,
                                int n_head) override;  // attention_cached.cu
  void gelu_forward(Tensor out, Tensor inp) override;
  void gelu_backward(Tensor dinp, Tensor inp, Tensor dout) override;
  // Llama's ops: rmsnorm.cu, rope.cu, swiglu.cu (grouped-query attention is in attention.cu).
  void rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) override;
  void head_rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, int first_head, int n_heads,
                            float eps) override;
  void head_rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd,
                             int first_head, int n_heads) override;
  void rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) override;
  void add_rmsnorm_forward(Tensor res, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor weight, float eps) override;
  void rmsnorm_backward_accumulate(Tensor dres, Tensor dweight, Tensor dout, Tensor inp, Tensor weight,
                                   Tensor rstd) override;
  void rope_forward(Tensor x, Tensor inv_freq, int n_rot_heads, Tensor positions = Tensor()) override;
  void rope_backward(Tensor dx, Tensor inv_freq, int n_rot_heads, Tensor positions = Tensor()) override;
  void swiglu_forward(Tensor out, Tensor inp) override;
  void swiglu_backward(Tensor dinp, Tensor inp, Tensor dout) override;
  void add(Tensor out, Tensor a, Tensor b) override;
  void accumulate(Tensor dst, Tensor src) override;
  void cross_entropy_forward(Tensor losses, Tensor logits, Tensor targets, int vocab) override;
  void cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor targets, float dloss, int vocab,
                              Tensor row_scale = Tensor()) override;
  void cross_entropy_slice_stats(Tensor stats, Tensor logits, Tensor targets, int real,
                                 Tensor xsum = Tensor()) override;
  void cross_entropy_slice_backward(Tensor dlogits, Tensor logits, Tensor targets, Tensor lse, float dloss,
                                    int real, Tensor row_scale = Tensor(),
                                    const EntropyGrad& entropy = EntropyGrad()) override;
  void adamw_update(Tensor param, Tensor grad, Tensor m, Tensor v, Tensor param_copy, const AdamW& hp) override;
  double sum_of_squares(Tensor x) override;
  void cast(Tensor dst, Tensor src) override;
  void scale(Tensor x, float factor) override;
  void dequantize_nf4(Tensor out, Tensor codes, Tensor absmax, int block) override;
  void dequantize_blockwise8(Tensor out, Tensor codes, Tensor absmax, int block, float offset) override;
  void dropout(Tensor out, Tensor inp, float p, std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
               std::int64_t row_stride = 0) override;

 private:
  // matmul.cu's helpers: a bias in a block the bias epilogue can read (staged when misaligned), and a
  // GEMM whose epilogue also writes a bias gradient, added into dbias (false: cuBLASLt has no kernel).
  const void* aligned_bias(const Tensor& bias, Buffer& staged);
  bool gemm_with_bias_grad(LtGemm g, LtEpilogue e, const Tensor& dbias, const char* op);
  void open_cudnn(const CudaBackendOptions& options);

  struct StreamDeleter {
    void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
  };

  int device_;
  std::string device_name_;  // "cuda:0 (NVIDIA H100 80GB HBM3)"
  std::unique_ptr<CUstream_st, StreamDeleter> stream_owner_;
  cudaStream_t stream_ = nullptr;  // stream_owner_'s stream, the one every op and copy is queued on
  std::unique_ptr<CachingAllocator> allocator_;
  Buffer lt_workspace_;           // cuBLASLt's scratch, from the allocator so memory_stats counts it
  std::unique_ptr<LtMatmul> lt_;  // cuBLASLt handle and cached matmul plans
  int sm_ = 0;                    // compute capability, major * 10 + minor
  AttentionImpl attention_;       // train.attention
  // cuDNN's SDPA (attention ops try it first), or null: attention_ is native, or cuDNN cannot run here,
  // cudnn_unavailable_ saying why (auto only: cudnn makes that a start-up error).
  std::unique_ptr<CudnnAttention> cudnn_;
  std::string cudnn_unavailable_;
};

}  // namespace zt::backend::cuda
