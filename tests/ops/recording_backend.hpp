// A Backend decorator that records the name of every op called and forwards it to an inner backend (or,
// dry, only records it). It overrides every op of backend.hpp: a new pure virtual op does not compile
// here until it has its line, and a new op with a default body is never recorded until it has one, so
// the coverage test (OpRegistry.EveryBackendOpHasACaseThatRunsInCi) fails either way. Memory calls
// always go to the inner backend. The driver's own tests derive from it to break ops.
#pragma once

#include <set>
#include <string>

#include "backend/backend.hpp"

namespace zt::backend::ops {

class RecordingBackend : public Backend {
 public:
  RecordingBackend(Backend& inner, bool run_ops) : in_(inner), run_(run_ops) {}
  const std::set<std::string>& called() const { return called_; }

  std::string name() const override { return "recording(" + in_.name() + ")"; }
  Buffer allocate(std::size_t bytes) override { return in_.allocate(bytes); }  // owned by the inner one
  void release(void* data, std::size_t bytes) override { in_.release(data, bytes); }
  void copy_from_host(void* d, const void* s, std::size_t n) override { in_.copy_from_host(d, s, n); }
  void copy_to_host(void* d, const void* s, std::size_t n) override { in_.copy_to_host(d, s, n); }
  void copy(void* d, const void* s, std::size_t n) override { in_.copy(d, s, n); }
  void synchronize() override { in_.synchronize(); }
  MemoryStats memory_stats() const override { return in_.memory_stats(); }
  void reset_peak() override { in_.reset_peak(); }
  void* stream() const override { return in_.stream(); }

#define ZT_FORWARD(op, params, args) \
  void op params override {          \
    called_.insert(#op);             \
    if (run_) in_.op args;           \
  }
  ZT_FORWARD(fill_zero, (Tensor t), (t))
  ZT_FORWARD(embedding_forward, (Tensor out, Tensor tok, Tensor wte, Tensor wpe, Tensor pos), (out, tok, wte, wpe, pos))
  ZT_FORWARD(embedding_backward, (Tensor dwte, Tensor dwpe, Tensor dout, Tensor tok, Tensor pos),
             (dwte, dwpe, dout, tok, pos))
  ZT_FORWARD(layernorm_forward, (Tensor o, Tensor m, Tensor r, Tensor x, Tensor w, Tensor b), (o, m, r, x, w, b))
  ZT_FORWARD(layernorm_backward, (Tensor dx, Tensor dw, Tensor db, Tensor dy, Tensor x, Tensor w, Tensor m, Tensor r),
             (dx, dw, db, dy, x, w, m, r))
  ZT_FORWARD(add_layernorm_forward,
             (Tensor res, Tensor o, Tensor m, Tensor r, Tensor a, Tensor b, Tensor w, Tensor bias),
             (res, o, m, r, a, b, w, bias))
  ZT_FORWARD(layernorm_backward_accumulate,
             (Tensor dres, Tensor dw, Tensor db, Tensor dy, Tensor x, Tensor w, Tensor m, Tensor r),
             (dres, dw, db, dy, x, w, m, r))
  ZT_FORWARD(matmul_backward_input_accumulate, (Tensor dx, Tensor dy, Tensor w, WeightLayout l), (dx, dy, w, l))
  ZT_FORWARD(matmul_gelu_forward, (Tensor o, Tensor pre, Tensor x, Tensor w, Tensor b, WeightLayout l),
             (o, pre, x, w, b, l))
  ZT_FORWARD(matmul_dgelu_backward, (Tensor dpre, Tensor db, Tensor dy, Tensor w, Tensor pre, WeightLayout l),
             (dpre, db, dy, w, pre, l))
  ZT_FORWARD(matmul_forward, (Tensor o, Tensor x, Tensor w, Tensor b, WeightLayout l), (o, x, w, b, l))
  ZT_FORWARD(matmul_backward, (Tensor dx, Tensor dw, Tensor db, Tensor dy, Tensor x, Tensor w, WeightLayout l),
             (dx, dw, db, dy, x, w, l))
  ZT_FORWARD(attention_forward, (Tensor o, Tensor lse, Tensor qkv, int nh, Tensor seg), (o, lse, qkv, nh, seg))
  ZT_FORWARD(attention_cached_forward, (Tensor o, Tensor qkv, Tensor kc, Tensor vc, Tensor slots, Tensor pos, int nh),
             (o, qkv, kc, vc, slots, pos, nh))
  ZT_FORWARD(attention_backward, (Tensor dqkv, Tensor dy, Tensor qkv, Tensor o, Tensor lse, int nh, Tensor seg),
             (dqkv, dy, qkv, o, lse, nh, seg))
  ZT_FORWARD(gelu_forward, (Tensor o, Tensor x), (o, x))
  ZT_FORWARD(gelu_backward, (Tensor dx, Tensor x, Tensor dy), (dx, x, dy))
  ZT_FORWARD(rmsnorm_forward, (Tensor o, Tensor r, Tensor x, Tensor w, float eps), (o, r, x, w, eps))
  ZT_FORWARD(rmsnorm_backward, (Tensor dx, Tensor dw, Tensor dy, Tensor x, Tensor w, Tensor r), (dx, dw, dy, x, w, r))
  ZT_FORWARD(add_rmsnorm_forward, (Tensor res, Tensor o, Tensor r, Tensor a, Tensor b, Tensor w, float eps),
             (res, o, r, a, b, w, eps))
  ZT_FORWARD(rmsnorm_backward_accumulate, (Tensor dres, Tensor dw, Tensor dy, Tensor x, Tensor w, Tensor r),
             (dres, dw, dy, x, w, r))
  ZT_FORWARD(head_rmsnorm_forward, (Tensor o, Tensor r, Tensor x, Tensor w, int first, int n, float eps),
             (o, r, x, w, first, n, eps))
  ZT_FORWARD(head_rmsnorm_backward,
             (Tensor dx, Tensor dw, Tensor dy, Tensor x, Tensor w, Tensor r, int first, int n),
             (dx, dw, dy, x, w, r, first, n))
  ZT_FORWARD(rope_forward, (Tensor x, Tensor f, int n, Tensor pos), (x, f, n, pos))
  ZT_FORWARD(rope_backward, (Tensor dx, Tensor f, int n, Tensor pos), (dx, f, n, pos))
  ZT_FORWARD(swiglu_forward, (Tensor o, Tensor x), (o, x))
  ZT_FORWARD(swiglu_backward, (Tensor dx, Tensor x, Tensor dy), (dx, x, dy))
  ZT_FORWARD(add, (Tensor o, Tensor a, Tensor b), (o, a, b))
  ZT_FORWARD(accumulate, (Tensor d, Tensor s), (d, s))
  ZT_FORWARD(cross_entropy_forward, (Tensor l, Tensor x, Tensor t, int v), (l, x, t, v))
  ZT_FORWARD(cross_entropy_backward, (Tensor dx, Tensor x, Tensor t, float dl, int v, Tensor w), (dx, x, t, dl, v, w))
  ZT_FORWARD(cross_entropy_slice_stats, (Tensor s, Tensor x, Tensor t, int real, Tensor xs), (s, x, t, real, xs))
  ZT_FORWARD(cross_entropy_slice_backward,
             (Tensor dx, Tensor x, Tensor t, Tensor lse, float dl, int real, Tensor w, const EntropyGrad& e),
             (dx, x, t, lse, dl, real, w, e))
  ZT_FORWARD(adamw_update, (Tensor p, Tensor g, Tensor m, Tensor v, Tensor c, const AdamW& hp), (p, g, m, v, c, hp))
  ZT_FORWARD(cast, (Tensor d, Tensor s), (d, s))
  ZT_FORWARD(scale, (Tensor x, float f), (x, f))
  ZT_FORWARD(dequantize_nf4, (Tensor o, Tensor codes, Tensor absmax, int block), (o, codes, absmax, block))
  ZT_FORWARD(dequantize_blockwise8, (Tensor o, Tensor codes, Tensor absmax, int block, float offset),
             (o, codes, absmax, block, offset))
  ZT_FORWARD(dropout,
             (Tensor o, Tensor x, float p, std::uint64_t seed, std::uint64_t s, std::uint64_t first,
              std::int64_t stride),
             (o, x, p, seed, s, first, stride))
#undef ZT_FORWARD
  double sum_of_squares(Tensor x) override {
    called_.insert("sum_of_squares");
    return run_ ? in_.sum_of_squares(x) : 0.0;
  }

 protected:
  Backend& in_;

 private:
  bool run_;
  std::set<std::string> called_;
};

}  // namespace zt::backend::ops
