// The CPU reference backend's class (internal to backend/cpu). Memory comes from a counting, 64-byte
// aligned allocator; the ops are defined one family per file (embedding.cpp, layernorm.cpp, ...).
#pragma once

#include <memory>

#include <mutex>

#include "backend/backend.hpp"
#include "backend/caching_allocator.hpp"

namespace zt::backend::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads);
  ~CpuBackend() override;
  std::string name() const override;
  int threads() const { return threads_; }

  Buffer allocate(std::size_t bytes) override;
  void release(void* data, std::size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill_zero(Tensor t) override;
  void synchronize() override {}
  MemoryStats memory_stats() const override;
  void reset_peak() override;

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
  void attention_cached_forward(Tensor out, Tensor qkv, Tensor k_cache, Tensor v_cache, Tensor slots, Tensor positions,
                                int n_head) override;
  void gelu_forward(Tensor out, Tensor inp) override;
  void gelu_backward(Tensor dinp, Tensor inp, Tensor dout) override;
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
  // Scratch for ops (attention's per-thread score tiles; in mixed precision the fp32 copies listed in
  // scratch.hpp): grown on demand, kept, and counted by the allocator like any buffer, so
  // memory_stats() shows it. One op uses it at a time, so its size is the largest op's need.
  float* workspace(std::size_t n_floats);

  int threads_;
  std::unique_ptr<CachingAllocator> allocator_;  // before workspace_: outlives every block
  Buffer workspace_;
};

}  // namespace zt::backend::cpu
