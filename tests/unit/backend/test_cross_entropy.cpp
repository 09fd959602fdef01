// Fused softmax + cross-entropy on the CPU backend: the loss by definition, the backward by finite
// differences and in place, and padded vocabulary columns that neither enter the loss nor get gradient.
#include <gtest/gtest.h>

#include "op_test_util.hpp"

namespace zt::backend::test {
namespace {

TEST(CrossEntropy, PaddedColumnsNeverEnterTheLoss) {
  auto be = make_cpu_backend(3);
  Tensors ts(*be);
  const std::int64_t N = 5, V = 13, Vp = 16;
  Tensor logits = ts.randn({N, Vp}, 1, 2.0f), losses = ts.zeros({N});
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t j = V; j < Vp; ++j) Tensors::f(logits)[n * Vp + j] = 1e4f;  // would dominate if read
  Tensor targets = ts.ints({N}, {0, 12, 5, 5, 7});
  be->cross_entropy_forward(losses, logits, targets, V);
  for (std::int64_t n = 0; n < N; ++n) {
    double mx = -1e300, sum = 0;
    for (std::int64_t j = 0; j < V; ++j) mx = std::max(mx, double(Tensors::f(logits)[n * Vp + j]));
    for (std::int64_t j = 0; j < V; ++j) sum += std::exp(Tensors::f(logits)[n * Vp + j] - mx);
    const double want = mx + std::log(sum) - Tensors::f(logits)[n * Vp + targets.i32("t")[n]];
    EXPECT_NEAR(Tensors::f(losses)[n], want, 1e-5);
  }
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferencesWithZeroPaddedColumns) {
  auto be = make_cpu_backend(3);
  for (std::int64_t N : {1, 7}) {
    Tensors ts(*be);
    const std::int64_t V = 11, Vp = 16;
    const float dloss = 0.37f;
    Tensor logits = ts.randn({N, Vp}, 1), losses = ts.zeros({N});
    std::vector<std::int32_t> t(N);
    for (std::int64_t n = 0; n < N; ++n) t[n] = static_cast<std::int32_t>((n * 5 + 3) % V);
    Tensor targets = ts.ints({N}, t);
    auto objective = [&] {
      be->cross_entropy_forward(losses, logits, targets, V);
      double s = 0;
      for (std::int64_t n = 0; n < N; ++n) s += double(dloss) * Tensors::f(losses)[n];
      return s;
    };
    const std::vector<double> want = numeric_grad(logits, objective);
    Tensor dlogits = ts.filled({N, Vp}, nan());
    be->cross_entropy_backward(dlogits, logits, targets, dloss, static_cast<int>(V));
    EXPECT_LT(norm_error(dlogits, want), kFdTolerance) << "N=" << N;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t j = V; j < Vp; ++j) EXPECT_EQ(Tensors::f(dlogits)[n * Vp + j], 0.0f);
    be->cross_entropy_backward(logits, logits, targets, dloss, static_cast<int>(V));  // in place
    EXPECT_EQ(values(logits), values(dlogits));
  }
}

// kIgnoreTarget rows (outside the loss mask): loss 0 and a zero gradient row; the other rows as without them.
TEST(CrossEntropy, IgnoredTargetsGiveZeroLossAndZeroGradient) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const std::int64_t N = 4, V = 11, Vp = 16;
  Tensor logits = ts.randn({N, Vp}, 3), losses = ts.filled({N}, 5.0f), plain = ts.zeros({N});
  be->cross_entropy_forward(losses, logits, ts.ints({N}, {2, kIgnoreTarget, 7, kIgnoreTarget}), V);
  be->cross_entropy_forward(plain, logits, ts.ints({N}, {2, 0, 7, 0}), V);
  EXPECT_EQ(Tensors::f(losses)[0], Tensors::f(plain)[0]);
  EXPECT_EQ(Tensors::f(losses)[1], 0.0f);
  EXPECT_EQ(Tensors::f(losses)[2], Tensors::f(plain)[2]);
  EXPECT_EQ(Tensors::f(losses)[3], 0.0f);
  Tensor dlogits = ts.filled({N, Vp}, nan());
  be->cross_entropy_backward(dlogits, logits, ts.ints({N}, {2, kIgnoreTarget, 7, kIgnoreTarget}), 0.5f, V);
  for (std::int64_t n : {1, 3})
    for (std::int64_t j = 0; j < Vp; ++j) EXPECT_EQ(Tensors::f(dlogits)[n * Vp + j], 0.0f);
  EXPECT_NE(Tensors::f(dlogits)[0], 0.0f);
  EXPECT_THROW(be->cross_entropy_forward(losses, logits, ts.ints({N}, {2, -2, 7, 0}), V), Error);  // only -1 is ignored
}

TEST(CrossEntropy, TargetOutsideTheVocabularyIsRefused) {
  auto be = make_cpu_backend(1);
  Tensors ts(*be);
  Tensor logits = ts.zeros({2, 8}), losses = ts.zeros({2});
  EXPECT_THROW(be->cross_entropy_forward(losses, logits, ts.ints({2}, {0, 6}), 6), Error);  // a padded column
  EXPECT_THROW(be->cross_entropy_forward(losses, logits, ts.ints({2}, {0, 1}), 9), Error);  // vocab > Vp
}

}  // namespace
}  // namespace zt::backend::test
