// The optimizer ops on the CPU backend: AdamW against torch.optim.AdamW's formula worked by hand in
// double, and a sum of squares that is exact to double and the same for any thread count.
#include <gtest/gtest.h>

#include "op_test_util.hpp"

namespace zt::backend::test {
namespace {

TEST(AdamW, TwoStepsMatchThePyTorchFormula) {
  auto be = make_cpu_backend(3);
  Tensors ts(*be);
  const std::int64_t n = 29;
  Tensor p = ts.randn({n}, 1), g = ts.randn({n}, 2), m = ts.zeros({n}), v = ts.zeros({n});
  std::vector<double> P(n), M(n, 0.0), Vv(n, 0.0);
  for (std::int64_t i = 0; i < n; ++i) P[i] = Tensors::f(p)[i];
  Backend::AdamW hp{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0, 0.5f};
  for (int step = 1; step <= 2; ++step) {
    hp.step = step;
    be->adamw_update(p, g, m, v, Tensor(), hp);
    const double bc1 = 1 - std::pow(double(hp.beta1), step), bc2 = 1 - std::pow(double(hp.beta2), step);
    for (std::int64_t i = 0; i < n; ++i) {
      const double gi = double(Tensors::f(g)[i]) * hp.grad_scale;
      P[i] *= 1 - double(hp.lr) * hp.weight_decay;
      M[i] = hp.beta1 * M[i] + (1 - double(hp.beta1)) * gi;
      Vv[i] = hp.beta2 * Vv[i] + (1 - double(hp.beta2)) * gi * gi;
      P[i] -= hp.lr / bc1 * M[i] / (std::sqrt(Vv[i]) / std::sqrt(bc2) + hp.eps);
    }
  }
  EXPECT_LT(norm_error(p, P), 1e-6);
  EXPECT_LT(norm_error(m, M), 1e-6);
  EXPECT_LT(norm_error(v, Vv), 1e-6);
}

TEST(SumOfSquares, ExactToDoubleAndIndependentOfThreads) {
  const std::int64_t n = 3 * (1 << 14) + 17;  // several blocks, the last one ragged
  double first = -1;
  for (int threads : {1, 2, 3}) {
    auto be = make_cpu_backend(threads);
    Tensors ts(*be);
    Tensor x = ts.randn({n}, 7);
    double want = 0;
    for (std::int64_t i = 0; i < n; ++i) want += double(Tensors::f(x)[i]) * Tensors::f(x)[i];
    const double got = be->sum_of_squares(x);
    EXPECT_NEAR(got, want, 1e-9 * want);
    if (first < 0) first = got;
    EXPECT_EQ(got, first) << threads << " threads";
  }
}

}  // namespace
}  // namespace zt::backend::test
