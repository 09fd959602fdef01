// Reproducibility: the same ops on the same inputs with the same thread count give the same bits
// (fixed partitions, fixed reduction orders, no atomics), including thread-split GEMMs and scatters, in
// f32 and in the 16-bit compute dtypes.
#include <gtest/gtest.h>

#include "op_test_util.hpp"

namespace zt::backend::test {
namespace {

// Forward and backward of every parameterised op once, on shapes large enough to split over threads;
// returns every output and gradient. Activations and weights are in x; statistics and parameter
// gradients f32 (backend.hpp's precision rules).
std::vector<std::vector<float>> run_ops(int threads, DType x_dtype = DType::kF32) {
  const DType X = x_dtype;
  auto be = make_cpu_backend(threads);
  Tensors ts(*be);
  const std::int64_t B = 2, T = 70, C = 48, V = 100, Vp = 128;
  const int NH = 3;
  Tensor wte = ts.randn({Vp, C}, 1, 1.0f, X), wpe = ts.randn({T, C}, 2, 1.0f, X), lw = ts.randn({C}, 3, 1.0f, X);
  Tensor lb = ts.randn({C}, 4, 1.0f, X), wqkv = ts.randn({C, 3 * C}, 5, 0.2f, X), bqkv = ts.randn({3 * C}, 6, 1.0f, X);
  std::vector<std::int32_t> tok(B * T);
  for (std::int64_t i = 0; i < B * T; ++i) tok[i] = static_cast<std::int32_t>((i * 37 + 11) % V);
  Tensor tokens = ts.ints({B, T}, tok);
  Tensor x = ts.zeros({B, T, C}, X), ln = ts.zeros({B, T, C}, X), mean = ts.zeros({B * T}), rstd = ts.zeros({B * T});
  Tensor qkv = ts.zeros({B, T, 3 * C}, X), att = ts.zeros({B, T, C}, X), lse = ts.zeros({B, NH, T});
  Tensor logits = ts.zeros({B, T, Vp}, X), losses = ts.zeros({B * T});
  be->embedding_forward(x, tokens, wte, wpe);
  be->layernorm_forward(ln, mean, rstd, x, lw, lb);
  be->matmul_forward(qkv, ln, wqkv, bqkv, WeightLayout::kInOut);
  be->attention_forward(att, lse, qkv, NH);
  be->matmul_forward(logits, att, wte, Tensor(), WeightLayout::kOutIn);
  be->cross_entropy_forward(losses, logits, tokens, static_cast<int>(V));
  Tensor dwte = ts.zeros({Vp, C}), dwpe = ts.zeros({T, C}), dlw = ts.zeros({C}), dlb = ts.zeros({C});
  Tensor dwqkv = ts.zeros({C, 3 * C}), dbqkv = ts.zeros({3 * C});
  Tensor datt = ts.zeros({B, T, C}, X), dqkv = ts.zeros({B, T, 3 * C}, X), dln = ts.zeros({B, T, C}, X);
  Tensor dx = ts.zeros({B, T, C}, X);
  be->cross_entropy_backward(logits, logits, tokens, 1.0f / (B * T), static_cast<int>(V));
  be->matmul_backward(datt, dwte, Tensor(), logits, att, wte, WeightLayout::kOutIn);
  be->attention_backward(dqkv, datt, qkv, att, lse, NH);
  be->matmul_backward(dln, dwqkv, dbqkv, dqkv, ln, wqkv, WeightLayout::kInOut);
  be->layernorm_backward(dx, dlw, dlb, dln, x, lw, mean, rstd);
  be->embedding_backward(dwte, dwpe, dx, tokens);
  std::vector<std::vector<float>> all;
  for (const Tensor& t : {losses, att, lse, dwte, dwpe, dlw, dlb, dwqkv, dbqkv, dqkv, dx}) all.push_back(values(t));
  return all;
}

TEST(Determinism, SameThreadCountGivesTheSameBits) {
  for (DType x : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int threads : {1, 3, 4}) {
      const auto a = run_ops(threads, x), b = run_ops(threads, x);
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(a[i], b[i]) << "output " << i << ", " << threads << " threads, " << dtype_name(x);
    }
  }
}

TEST(Determinism, OtherThreadCountsAgreeToRounding) {
  const auto a = run_ops(1), b = run_ops(3);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_LT(norm_error(std::vector<double>(a[i].begin(), a[i].end()), std::vector<double>(b[i].begin(), b[i].end())),
              1e-6)
        << "output " << i;
  }
}

}  // namespace
}  // namespace zt::backend::test
