// Embedding and LayerNorm on the CPU backend: forward by definition and the refusals. Their backward
// against finite differences, and the gradient rule, are op cases (tests/ops/cases_embedding.cpp,
// cases_norm.cpp).
#include <gtest/gtest.h>

#include "op_test_util.hpp"

namespace zt::backend::test {
namespace {

TEST(Embedding, ForwardAddsTokenAndPositionRows) {
  auto be = make_cpu_backend(3);
  Tensors ts(*be);
  const std::int64_t B = 2, T = 7, C = 5, Vp = 11;
  Tensor wte = ts.randn({Vp, C}, 1), wpe = ts.randn({9, C}, 2), out = ts.zeros({B, T, C});
  Tensor tok = ts.ints({B, T}, {3, 3, 0, 10, 7, 3, 1, 2, 2, 9, 0, 5, 5, 4});
  be->embedding_forward(out, tok, wte, wpe);
  for (std::int64_t bt = 0; bt < B * T; ++bt)
    for (std::int64_t c = 0; c < C; ++c)
      EXPECT_EQ(Tensors::f(out)[bt * C + c],
                Tensors::f(wte)[tok.i32("t")[bt] * C + c] + Tensors::f(wpe)[(bt % T) * C + c]);
}

TEST(Embedding, TokenOutsideTheTableIsRefused) {
  auto be = make_cpu_backend(1);
  Tensors ts(*be);
  Tensor wte = ts.zeros({4, 3}), wpe = ts.zeros({2, 3}), out = ts.zeros({1, 2, 3});
  EXPECT_THROW(be->embedding_forward(out, ts.ints({1, 2}, {0, 4}), wte, wpe), Error);
  EXPECT_THROW(be->embedding_forward(out, ts.ints({1, 2}, {-1, 0}), wte, wpe), Error);
}

TEST(Layernorm, ForwardNormalisesEachRow) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const std::int64_t N = 7, C = 5;
  Tensor x = ts.randn({N, C}, 1, 3.0f), w = ts.filled({C}, 1.0f), b = ts.zeros({C});
  Tensor y = ts.zeros({N, C}), mean = ts.zeros({N}), rstd = ts.zeros({N});
  be->layernorm_forward(y, mean, rstd, x, w, b);
  for (std::int64_t n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (std::int64_t c = 0; c < C; ++c) m += Tensors::f(y)[n * C + c] / double(C);
    for (std::int64_t c = 0; c < C; ++c) v += std::pow(Tensors::f(y)[n * C + c] - m, 2) / double(C);
    EXPECT_NEAR(m, 0.0, 1e-6);
    EXPECT_NEAR(v, 1.0, 1e-3);  // var / (var + eps)
  }
}

TEST(Layernorm, ShapeMismatchNamesBothShapes) {
  auto be = make_cpu_backend(1);
  Tensors ts(*be);
  Tensor x = ts.zeros({4, 5}), y = ts.zeros({4, 6}), m = ts.zeros({4}), r = ts.zeros({4}), w = ts.zeros({5});
  try {
    be->layernorm_forward(y, m, r, x, w, w);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[4, 6]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zt::backend::test
