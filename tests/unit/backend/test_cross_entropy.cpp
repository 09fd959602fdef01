// Fused softmax + cross-entropy on the CPU backend: the loss by definition, padded vocabulary columns
// that never enter it, ignored targets, the refusals, and the vocabulary slices against the whole row.
// The backward by finite differences, in place and with zero padded columns, is an op case
// (tests/ops/cases_loss.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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

// The vocabulary-parallel pieces: the logits cut into slices of Vs columns (as TP ranks hold them),
// each slice's (max, sum of exp, target logit) combined as layers/vocab_parallel.cpp does give the whole
// row's loss, and each slice's backward with that lse is the whole row's gradient, columns for columns:
// for a vocabulary that ends inside the last slice, and one whose last slice holds no id at all.
TEST(CrossEntropy, SlicesOfTheVocabularyCombineToTheWholeRow) {
  auto be = make_cpu_backend(2);
  for (const int V : {13, 9}) {
    Tensors ts(*be);
    const std::int64_t N = 5, Vs = 5, slices = 3, Vp = Vs * slices;
    const float dloss = 0.3f;
    Tensor logits = ts.randn({N, Vp}, 11, 2.0f);
    const std::vector<std::int32_t> t{0, static_cast<std::int32_t>(V - 1), 6, kIgnoreTarget, 4};
    Tensor targets = ts.ints({N}, t), whole_loss = ts.zeros({N}), whole_grad = ts.filled({N, Vp}, nan());
    be->cross_entropy_forward(whole_loss, logits, targets, V);
    be->cross_entropy_backward(whole_grad, logits, targets, dloss, V);

    std::vector<Tensor> part, part_targets;
    std::vector<int> real;
    std::vector<double> max(N, -INFINITY), sum(N, 0.0), target_logit(N, 0.0);
    std::vector<std::vector<float>> stats;
    for (std::int64_t r = 0; r < slices; ++r) {
      part.push_back(ts.zeros({N, Vs}));
      std::vector<std::int32_t> local(N);
      for (std::int64_t n = 0; n < N; ++n) {
        for (std::int64_t j = 0; j < Vs; ++j) Tensors::f(part[r])[n * Vs + j] = Tensors::f(logits)[n * Vp + r * Vs + j];
        const std::int64_t c = t[n] - r * Vs;
        local[n] = t[n] == kIgnoreTarget ? kIgnoreTarget : c >= 0 && c < Vs ? static_cast<std::int32_t>(c) : kTargetInOtherSlice;
      }
      part_targets.push_back(ts.ints({N}, local));
      real.push_back(static_cast<int>(std::clamp<std::int64_t>(V - r * Vs, 0, Vs)));
      Tensor st = ts.filled({N, 3}, nan());
      be->cross_entropy_slice_stats(st, part[r], part_targets[r], real[r]);
      stats.push_back(values(st));
      for (std::int64_t n = 0; n < N; ++n) max[n] = std::max(max[n], double(stats[r][3 * n]));
    }
    if (V == 9) {
      EXPECT_EQ(stats[2][0], -INFINITY) << "a slice without ids has max -inf";
    }
    Tensor lse = ts.zeros({N});
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t r = 0; r < slices; ++r) {
        if (real[r] > 0) sum[n] += stats[r][3 * n + 1] * std::exp(stats[r][3 * n] - max[n]);
        target_logit[n] += stats[r][3 * n + 2];
      }
      Tensors::f(lse)[n] = static_cast<float>(max[n] + std::log(sum[n]));
      const double loss = t[n] == kIgnoreTarget ? 0.0 : Tensors::f(lse)[n] - target_logit[n];
      EXPECT_NEAR(loss, Tensors::f(whole_loss)[n], 1e-5) << "V=" << V << " row " << n;
    }
    for (std::int64_t r = 0; r < slices; ++r) {
      be->cross_entropy_slice_backward(part[r], part[r], part_targets[r], lse, dloss, real[r]);  // in place
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t j = 0; j < Vs; ++j)
          EXPECT_NEAR(Tensors::f(part[r])[n * Vs + j], Tensors::f(whole_grad)[n * Vp + r * Vs + j], 1e-6)
              << "V=" << V << " row " << n << " column " << r * Vs + j;
    }
  }
}

// The entropy's statistic (xsum = sum exp(x - m) (x - m) over the slice's ids) by its definition, 0 for a
// slice without ids; and the entropy term's gradient p_j (lse - H - x_j) on its own (row_scale 0).
TEST(CrossEntropy, SliceEntropyStatisticAndGradient) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const std::int64_t N = 4, Vs = 9;
  const int real = 7;
  Tensor logits = ts.randn({N, Vs}, 21, 2.0f), stats = ts.zeros({N, 3}), xsum = ts.filled({N}, nan());
  Tensor targets = ts.ints({N}, {0, kTargetInOtherSlice, 6, kIgnoreTarget});
  be->cross_entropy_slice_stats(stats, logits, targets, real, xsum);
  Tensor lse = ts.zeros({N}), H = ts.zeros({N}), e = ts.zeros({N}), zero = ts.zeros({N});
  for (std::int64_t n = 0; n < N; ++n) {
    const float* row = Tensors::f(logits) + n * Vs;
    const double m = Tensors::f(stats)[3 * n];
    double want = 0, sum = 0;
    for (int j = 0; j < real; ++j) want += std::exp(row[j] - m) * (row[j] - m), sum += std::exp(row[j] - m);
    EXPECT_NEAR(Tensors::f(xsum)[n], want, 1e-5 * std::abs(want)) << "row " << n;
    Tensors::f(lse)[n] = static_cast<float>(m + std::log(sum));
    Tensors::f(H)[n] = static_cast<float>(std::log(sum) - want / sum);
    Tensors::f(e)[n] = 0.5f - 0.25f * static_cast<float>(n);
  }
  Tensor dlogits = ts.filled({N, Vs}, nan());
  be->cross_entropy_slice_backward(dlogits, logits, targets, lse, 0.5f, real, zero, {H, e});
  for (std::int64_t n = 0; n < N; ++n) {
    const float* row = Tensors::f(logits) + n * Vs;
    double mean = 0;
    for (int j = 0; j < real; ++j) mean += std::exp(row[j] - Tensors::f(lse)[n]) * row[j];
    for (int j = 0; j < Vs; ++j) {
      const double p = std::exp(row[j] - Tensors::f(lse)[n]);
      const double want = n == 3 || j >= real ? 0.0 : 0.5 * Tensors::f(e)[n] * p * (mean - row[j]);
      EXPECT_NEAR(Tensors::f(dlogits)[n * Vs + j], want, 1e-6) << "row " << n << " column " << j;
    }
  }
  Tensor none = ts.zeros({1, Vs}), none_xsum = ts.filled({1}, nan()), none_stats = ts.zeros({1, 3});
  be->cross_entropy_slice_stats(none_stats, none, ts.ints({1}, {kTargetInOtherSlice}), 0, none_xsum);
  EXPECT_EQ(Tensors::f(none_xsum)[0], 0.0f) << "a slice without ids";
}

TEST(CrossEntropy, SliceTargetsOutsideTheSliceAreRefused) {
  auto be = make_cpu_backend(1);
  Tensors ts(*be);
  Tensor logits = ts.zeros({2, 8}), stats = ts.zeros({2, 3});
  EXPECT_NO_THROW(be->cross_entropy_slice_stats(stats, logits, ts.ints({2}, {kTargetInOtherSlice, kIgnoreTarget}), 6));
  EXPECT_THROW(be->cross_entropy_slice_stats(stats, logits, ts.ints({2}, {0, 6}), 6), Error);  // a padded column
  EXPECT_THROW(be->cross_entropy_slice_stats(stats, logits, ts.ints({2}, {0, -3}), 6), Error);
  EXPECT_THROW(be->cross_entropy_slice_stats(stats, logits, ts.ints({2}, {0, 1}), 9), Error);  // real > Vs
}

}  // namespace
}  // namespace zt::backend::test
