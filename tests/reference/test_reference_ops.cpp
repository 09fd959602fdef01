// Every CPU backend op against PyTorch (float64 autograd on the same float32 inputs): outputs and
// gradients within 1e-5 normalised error, each named tensor's error printed (ops_reference.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "backend/backend.hpp"
#include "model/rope.hpp"
#include "golden.hpp"

namespace zt::reference {
namespace {

using backend::Backend;
using backend::Buffer;
using backend::Tensor;
using backend::WeightLayout;

constexpr double kTolerance = 1e-5;

class ReferenceOps : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip;
    g_ = golden_of("ops_reference.py", ZT_REFERENCE_OUT "/ops_golden.safetensors", skip);
    if (!g_) GTEST_SKIP() << skip;
  }

  // A backend tensor holding golden input `name` (f32 or i32) with its shape.
  Tensor input(const std::string& name) {
    const bool ints = g_->dtype(name) == "I32";
    Tensor t = zeros(g_->shape(name), ints ? DType::kI32 : DType::kF32);
    if (ints) std::memcpy(t.data, g_->i32(name).data(), t.bytes());
    else std::memcpy(t.data, g_->f32(name).data(), t.bytes());
    return t;
  }
  Tensor zeros(const std::vector<std::int64_t>& shape, DType dtype = DType::kF32) {
    Tensor t;
    t.dtype = dtype;
    for (std::int64_t d : shape) t.shape[t.rank++] = d;
    bufs_.push_back(be_->allocate(t.bytes() + 1));
    t.data = bufs_.back().data();
    be_->fill_zero(t);
    return t;
  }
  Tensor zeros_like(const std::string& name) { return zeros(g_->shape(name)); }

  // got vs golden `name`: normalised error below kTolerance, printed per named tensor.
  void check(const Tensor& got, const std::string& name) {
    const float* p = got.f32("check");
    const std::vector<double> want = g_->f64(name);
    const std::vector<double> have(p, p + got.numel());
    double max_abs = 0;
    for (std::size_t i = 0; i < want.size() && i < have.size(); ++i)
      max_abs = std::max(max_abs, std::fabs(have[i] - want[i]));
    const double err = norm_error(have, want);
    std::printf("  %-32s nerr %.3e  max|diff| %.3e\n", name.c_str(), err, max_abs);
    EXPECT_LT(err, kTolerance) << name;
  }

  std::unique_ptr<Backend> be_ = backend::make_cpu_backend(3);
  const Golden* g_ = nullptr;
  std::vector<Buffer> bufs_;
};

TEST_F(ReferenceOps, EmbeddingMatchesPyTorch) {
  Tensor wte = input("embedding.wte"), wpe = input("embedding.wpe"), tok = input("embedding.tokens");
  Tensor out = zeros_like("embedding.out"), dwte = zeros_like("embedding.wte"), dwpe = zeros_like("embedding.wpe");
  be_->embedding_forward(out, tok, wte, wpe);
  be_->embedding_backward(dwte, dwpe, input("embedding.dout"), tok);
  check(out, "embedding.out");
  check(dwte, "embedding.dwte");
  check(dwpe, "embedding.dwpe");
}

TEST_F(ReferenceOps, LayernormMatchesPyTorch) {
  for (std::string c : {"layernorm_small.", "layernorm_wide."}) {
    Tensor x = input(c + "inp"), w = input(c + "weight"), b = input(c + "bias");
    Tensor y = zeros_like(c + "out"), mean = zeros_like(c + "mean"), rstd = zeros_like(c + "rstd");
    Tensor dx = zeros_like(c + "inp"), dw = zeros_like(c + "weight"), db = zeros_like(c + "bias");
    be_->layernorm_forward(y, mean, rstd, x, w, b);
    be_->layernorm_backward(dx, dw, db, input(c + "dout"), x, w, mean, rstd);
    for (auto [t, n] : {std::pair{y, "out"}, {mean, "mean"}, {rstd, "rstd"}, {dx, "dinp"}, {dw, "dweight"}, {db, "dbias"}})
      check(t, c + n);
  }
}

TEST_F(ReferenceOps, MatmulMatchesPyTorchInBothLayouts) {
  for (std::string lay : {"inout", "outin"})
    for (std::string kind : {"_bias.", "_nobias.", "_split."}) {
      const std::string c = "matmul_" + lay + kind;
      const WeightLayout layout = lay == "inout" ? WeightLayout::kInOut : WeightLayout::kOutIn;
      const bool bias = kind != "_nobias.";
      Tensor x = input(c + "inp"), w = input(c + "weight"), b = bias ? input(c + "bias") : Tensor();
      Tensor y = zeros_like(c + "out"), dx = zeros_like(c + "inp"), dw = zeros_like(c + "weight");
      Tensor db = bias ? zeros_like(c + "bias") : Tensor();
      be_->matmul_forward(y, x, w, b, layout);
      be_->matmul_backward(dx, dw, db, input(c + "dout"), x, w, layout);
      check(y, c + "out");
      check(dx, c + "dinp");
      check(dw, c + "dweight");
      if (bias) check(db, c + "dbias");
    }
}

TEST_F(ReferenceOps, AttentionMatchesPyTorch) {
  for (auto [name, nh] : {std::pair{"attention_nh1.", 1}, {"attention_nh3.", 3}, {"attention_blocks.", 2}}) {
    const std::string c = name;
    Tensor qkv = input(c + "qkv"), out = zeros_like(c + "out"), lse = zeros_like(c + "lse");
    Tensor dqkv = zeros_like(c + "qkv");
    be_->attention_forward(out, lse, qkv, nh);
    be_->attention_backward(dqkv, input(c + "dout"), qkv, out, lse, nh);
    check(out, c + "out");
    check(lse, c + "lse");
    check(dqkv, c + "dqkv");
  }
}

TEST_F(ReferenceOps, GeluMatchesPyTorchTanhApproximation) {
  Tensor x = input("gelu.inp"), y = zeros_like("gelu.out"), dx = zeros_like("gelu.inp");
  be_->gelu_forward(y, x);
  be_->gelu_backward(dx, x, input("gelu.dout"));
  check(y, "gelu.out");
  check(dx, "gelu.dinp");
}

TEST_F(ReferenceOps, CrossEntropyMatchesPyTorchOverRealColumnsOnly) {
  for (std::string c : {"cross_entropy.", "cross_entropy_n1."}) {
    Tensor logits = input(c + "logits"), targets = input(c + "targets");
    const float dloss = g_->f32(c + "dloss")[0];
    const int vocab = g_->i32(c + "vocab")[0];
    Tensor losses = zeros_like(c + "losses");
    be_->cross_entropy_forward(losses, logits, targets, vocab);
    be_->cross_entropy_backward(logits, logits, targets, dloss, vocab);  // in place, as the model runs it
    check(losses, c + "losses");
    check(logits, c + "dlogits");
  }
}

TEST_F(ReferenceOps, AdamWMatchesTorchOptimAdamW) {
  const std::vector<double> hp = g_->f64("adamw.hp");
  Tensor p = input("adamw.param0"), grads = input("adamw.grads");
  const std::int64_t n = p.numel();
  Tensor m = zeros_like("adamw.param0"), v = zeros_like("adamw.param0");
  for (int step = 1; step <= static_cast<int>(hp[6]); ++step) {
    Tensor g = grads;
    g.rank = 1, g.shape[0] = n, g.data = grads.f32("t") + (step - 1) * n;
    Backend::AdamW a{float(hp[0]), float(hp[1]), float(hp[2]), float(hp[3]), float(hp[4]), step, float(hp[5])};
    be_->adamw_update(p, g, m, v, Tensor(), a);
  }
  check(p, "adamw.param");
  check(m, "adamw.exp_avg");
  check(v, "adamw.exp_avg_sq");
}

TEST_F(ReferenceOps, SumOfSquaresMatchesFloat64) {
  const double got = be_->sum_of_squares(input("sum_of_squares.x"));
  const double want = g_->f64("sum_of_squares.sum")[0];
  std::printf("  sum_of_squares                  rel %.3e\n", std::fabs(got - want) / want);
  EXPECT_LT(std::fabs(got - want) / want, 1e-12);
}

TEST_F(ReferenceOps, RmsNormMatchesHuggingFaceLlama) {
  for (auto [name, eps] : {std::pair{"rmsnorm_small.", 1e-5f}, {"rmsnorm_wide.", 1e-6f}}) {
    const std::string c = name;
    Tensor x = input(c + "inp"), w = input(c + "weight");
    Tensor y = zeros_like(c + "out"), rstd = zeros_like(c + "rstd"), dx = zeros_like(c + "inp"), dw = zeros_like(c + "weight");
    be_->rmsnorm_forward(y, rstd, x, w, eps);
    be_->rmsnorm_backward(dx, dw, input(c + "dout"), x, w, rstd);
    for (auto [t, n] : {std::pair{y, "out"}, {rstd, "rstd"}, {dx, "dinp"}, {dw, "dweight"}}) check(t, c + n);
  }
}

// The inverse frequencies (HF's fp32 computation, llama3 scaling included) and the rotation.
TEST_F(ReferenceOps, RopeMatchesHuggingFaceRotateHalfAndLlama3Frequencies) {
  for (std::string c : {"rope_plain.", "rope_llama3.", "rope_llama3_short."}) {
    const std::vector<double> p = g_->f64(c + "params");
    const model::RopeParams rp{p[2], p[3] != 0, p[4], p[5], p[6], static_cast<std::int64_t>(p[7])};
    const int n_rot = static_cast<int>(p[0]), hs = static_cast<int>(p[1]);
    const std::vector<float> inv = model::rope_inv_freq(hs, rp);
    Tensor freq = zeros({hs / 2});
    std::memcpy(freq.data, inv.data(), inv.size() * sizeof(float));
    check(freq, c + "inv_freq");
    Tensor x = input(c + "x"), dx = input(c + "dout");
    be_->rope_forward(x, freq, n_rot);
    be_->rope_backward(dx, freq, n_rot);
    check(x, c + "out");
    check(dx, c + "dx");
  }
}

TEST_F(ReferenceOps, SwiGluMatchesPyTorch) {
  Tensor x = input("swiglu.inp"), y = zeros_like("swiglu.out"), dx = zeros_like("swiglu.inp");
  be_->swiglu_forward(y, x);
  be_->swiglu_backward(dx, x, input("swiglu.dout"));
  check(y, "swiglu.out");
  check(dx, "swiglu.dinp");
}

TEST_F(ReferenceOps, GroupedQueryAttentionMatchesRepeatKv) {
  for (std::string c : {"gqa.", "mqa."}) {
    const int nh = g_->i32(c + "heads")[0];
    Tensor qkv = input(c + "qkv"), out = zeros_like(c + "out"), lse = zeros_like(c + "lse");
    Tensor dqkv = zeros_like(c + "qkv");
    be_->attention_forward(out, lse, qkv, nh);
    be_->attention_backward(dqkv, input(c + "dout"), qkv, out, lse, nh);
    check(out, c + "out");
    check(lse, c + "lse");
    check(dqkv, c + "dqkv");
  }
}

}  // namespace
}  // namespace zt::reference
