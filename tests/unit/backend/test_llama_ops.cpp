// Llama's CPU ops in fp32: RMSNorm and SwiGLU against double loops, RoPE against a hand rotation (and its
// backward as the transpose), HF's inverse frequencies with llama3 scaling, and grouped-query attention
// against multi-head attention over repeated K/V heads (HF's repeat_kv). Their backward against finite
// differences is an op case (tests/ops/cases_norm.cpp, cases_activation.cpp, cases_attention.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "model/rope.hpp"
#include "op_test_util.hpp"

namespace zt::backend::test {
namespace {

TEST(RmsNorm, ForwardMatchesADoubleLoopAndKeepsRstd) {
  auto be = make_cpu_backend(3);
  Tensors ts(*be);
  const std::int64_t N = 5, C = 37;
  Tensor x = ts.randn({N, C}, 1, 2.0f), w = ts.randn({C}, 2), y = ts.filled({N, C}, nan()), rstd = ts.zeros({N});
  be->rmsnorm_forward(y, rstd, x, w, 1e-5f);
  std::vector<double> want_y(N * C), want_r(N);
  for (std::int64_t n = 0; n < N; ++n) {
    double sq = 0;
    for (std::int64_t c = 0; c < C; ++c) sq += double(Tensors::f(x)[n * C + c]) * Tensors::f(x)[n * C + c];
    want_r[n] = 1.0 / std::sqrt(sq / C + 1e-5);
    for (std::int64_t c = 0; c < C; ++c) want_y[n * C + c] = Tensors::f(x)[n * C + c] * want_r[n] * Tensors::f(w)[c];
  }
  EXPECT_LT(norm_error(y, want_y), 1e-6);
  EXPECT_LT(norm_error(rstd, want_r), 1e-6);
}

TEST(SwiGlu, ForwardIsSiluOfGateTimesUp) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const std::int64_t N = 3, F = 21;
  Tensor inp = ts.randn({N, 2 * F}, 1, 3.0f), out = ts.filled({N, F}, nan());
  be->swiglu_forward(out, inp);
  std::vector<double> want(N * F);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t j = 0; j < F; ++j) {
      const double g = Tensors::f(inp)[n * 2 * F + j], u = Tensors::f(inp)[n * 2 * F + F + j];
      want[n * F + j] = g / (1 + std::exp(-g)) * u;
    }
  EXPECT_LT(norm_error(out, want), 1e-6);
}

Tensor inv_freq_tensor(Tensors& ts, const std::vector<float>& f) {
  Tensor t = ts.zeros({static_cast<std::int64_t>(f.size())});
  std::copy(f.begin(), f.end(), Tensors::f(t));
  return t;
}

TEST(Rope, RotatesChannelIWithIPlusHalfByPositionTimesFrequencyAndLeavesTheRest) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const std::int64_t B = 2, T = 5, hs = 4, W = 3 * hs;  // two rotated heads, then one left alone
  const std::vector<float> freq{1.0f, 0.25f};
  Tensor x = ts.randn({B, T, W}, 1);
  const std::vector<float> before = values(x);
  be->rope_forward(x, inv_freq_tensor(ts, freq), 2);
  std::vector<double> want(before.begin(), before.end());
  for (std::int64_t bt = 0; bt < B * T; ++bt)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 2; ++i) {
        const double a = double(bt % T) * freq[i];
        const std::int64_t p = bt * W + h * hs + i;
        want[p] = before[p] * std::cos(a) - before[p + 2] * std::sin(a);
        want[p + 2] = before[p + 2] * std::cos(a) + before[p] * std::sin(a);
      }
  EXPECT_LT(norm_error(x, want), 1e-6);
  const std::vector<float> after = values(x);
  for (std::int64_t bt = 0; bt < B * T; ++bt)
    for (std::int64_t c = 2 * hs; c < W; ++c) EXPECT_EQ(after[bt * W + c], before[bt * W + c]);
  for (std::int64_t c = 0; c < W; ++c) EXPECT_EQ(after[c], before[c]) << "position 0 is not rotated";
}

TEST(Rope, BackwardIsTheTransposedRotation) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const std::int64_t B = 1, T = 9, W = 24;
  Tensor f = inv_freq_tensor(ts, model::rope_inv_freq(8, model::RopeParams{10000}));
  Tensor x = ts.randn({B, T, W}, 1), y = ts.randn({B, T, W}, 2);
  const Tensor x0 = ts.as(x, DType::kF32), y0 = ts.as(y, DType::kF32);
  be->rope_forward(x, f, 3);
  be->rope_backward(y, f, 3);
  EXPECT_NEAR(dot(x, y0), dot(x0, y), 1e-4);  // <R x, y> = <x, R^T y>
  be->rope_backward(x, f, 3);                   // R^T R = I
  EXPECT_LT(norm_error(x, x0), 1e-6);
}

TEST(Rope, InverseFrequenciesFollowHuggingFace) {
  const std::vector<float> plain = model::rope_inv_freq(4, model::RopeParams{10000});
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_FLOAT_EQ(plain[0], 1.0f);
  EXPECT_FLOAT_EQ(plain[1], 0.01f);
  // llama3 scaling (factor 8, low 1, high 4, original 8192): wavelengths under 8192/4 = 2048 are kept,
  // over 8192 divided by 8, and in between interpolated: check one of each for hs = 128, theta 500000.
  model::RopeParams p{500000, true, 8, 1, 4, 8192};
  const std::vector<float> base = model::rope_inv_freq(128, model::RopeParams{500000});
  const std::vector<float> scaled = model::rope_inv_freq(128, p);
  int kept = 0, divided = 0, between = 0;
  for (std::size_t i = 0; i < base.size(); ++i) {
    const double wavelen = 2 * M_PI / base[i];
    if (wavelen < 2048) kept += scaled[i] == base[i];
    else if (wavelen > 8192) divided += std::abs(scaled[i] - base[i] / 8) <= 1e-6 * base[i];
    else {
      const double s = (8192 / wavelen - 1) / 3;
      between += std::abs(scaled[i] - ((1 - s) * base[i] / 8 + s * base[i])) <= 1e-5 * base[i];
    }
  }
  EXPECT_EQ(kept + divided + between, 64);
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(between, 0);
}

// MHA qkv [B,T,3C] from a GQA one [B,T,C + 2 NKV hs] by repeating each K/V head NH/NKV times.
Tensor repeat_kv(Tensors& ts, const Tensor& gqa, std::int64_t C, int NH, int NKV) {
  const std::int64_t B = gqa.dim(0), T = gqa.dim(1), W = gqa.dim(2), hs = C / NH;
  Tensor mha = ts.zeros({B, T, 3 * C});
  for (std::int64_t bt = 0; bt < B * T; ++bt) {
    const float* g = Tensors::f(gqa) + bt * W;
    float* m = Tensors::f(mha) + bt * 3 * C;
    std::copy(g, g + C, m);
    for (int h = 0; h < NH; ++h)
      for (int part = 1; part <= 2; ++part)
        std::copy_n(g + C + (part - 1) * NKV * hs + (h / (NH / NKV)) * hs, hs, m + part * C + h * hs);
  }
  return mha;
}

TEST(GroupedQueryAttention, EqualsMultiHeadAttentionOverRepeatedKvHeads) {
  auto be = make_cpu_backend(3);
  struct Case {
    std::int64_t B, T;
    int NH, NKV;
  };
  for (const Case k : {Case{2, 7, 4, 2}, Case{1, 70, 3, 1}, Case{2, 5, 6, 3}, Case{1, 9, 2, 2}}) {
    Tensors ts(*be);
    const std::int64_t hs = 4, C = k.NH * hs, W = C + 2 * k.NKV * hs;
    Tensor qkv = ts.randn({k.B, k.T, W}, 1), out = ts.zeros({k.B, k.T, C}), lse = ts.zeros({k.B, k.NH, k.T});
    Tensor mha = repeat_kv(ts, qkv, C, k.NH, k.NKV);
    Tensor mout = ts.zeros({k.B, k.T, C}), mlse = ts.zeros({k.B, k.NH, k.T});
    be->attention_forward(out, lse, qkv, k.NH);
    be->attention_forward(mout, mlse, mha, k.NH);
    EXPECT_EQ(values(out), values(mout)) << "NH=" << k.NH << " NKV=" << k.NKV;
    EXPECT_EQ(values(lse), values(mlse));

    Tensor dout = ts.randn({k.B, k.T, C}, 2), dqkv = ts.filled({k.B, k.T, W}, nan());
    Tensor dmha = ts.zeros({k.B, k.T, 3 * C});
    be->attention_backward(dqkv, dout, qkv, out, lse, k.NH);
    be->attention_backward(dmha, dout, mha, mout, mlse, k.NH);
    // dK, dV of a shared head = the sum of the repeated heads' gradients (the transpose of repeat_kv).
    std::vector<double> want(k.B * k.T * W, 0.0);
    for (std::int64_t bt = 0; bt < k.B * k.T; ++bt) {
      const float* m = Tensors::f(dmha) + bt * 3 * C;
      double* g = want.data() + bt * W;
      for (std::int64_t c = 0; c < C; ++c) g[c] = m[c];
      for (int h = 0; h < k.NH; ++h)
        for (int part = 1; part <= 2; ++part)
          for (std::int64_t c = 0; c < hs; ++c)
            g[C + (part - 1) * k.NKV * hs + (h / (k.NH / k.NKV)) * hs + c] += m[part * C + h * hs + c];
    }
    EXPECT_LT(norm_error(dqkv, want), 1e-6) << "NH=" << k.NH << " NKV=" << k.NKV;
  }
}

TEST(GroupedQueryAttention, KvHeadsThatDoNotDivideHeadsAreRefused) {
  auto be = make_cpu_backend(1);
  Tensors ts(*be);
  // NH = 4, hs = 2: k and v of 3 heads (12 columns) after q's 8.
  Tensor qkv = ts.zeros({1, 2, 20}), out = ts.zeros({1, 2, 8}), lse = ts.zeros({1, 4, 2});
  EXPECT_THROW(be->attention_forward(out, lse, qkv, 4), Error);
}

TEST(Embedding, WithoutPositionTableIsTheTokenRow) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const std::int64_t Vp = 8, C = 5;
  Tensor wte = ts.randn({Vp, C}, 1), tok = ts.ints({1, 3}, {7, 0, 7}), out = ts.zeros({1, 3, C});
  be->embedding_forward(out, tok, wte, Tensor());
  for (std::int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(Tensors::f(out)[c], Tensors::f(wte)[7 * C + c]);
    EXPECT_EQ(Tensors::f(out)[C + c], Tensors::f(wte)[c]);
  }
  Tensor dwte = ts.zeros({Vp, C}), dout = ts.filled({1, 3, C}, 1.0f);
  be->embedding_backward(dwte, Tensor(), dout, tok);
  EXPECT_EQ(Tensors::f(dwte)[7 * C], 2.0f);
  EXPECT_EQ(Tensors::f(dwte)[0], 1.0f);
  EXPECT_EQ(Tensors::f(dwte)[C], 0.0f);
}

}  // namespace
}  // namespace zt::backend::test
