// PPO's host arithmetic (rl/ppo): token-level rewards with and without the KL penalty; GAE in hand-worked
// cases (gamma = lambda = 1 gives the reward-to-go, lambda = 0 the TD error, a two-token case, responses
// independent of each other); whitening to mean 0 / unbiased variance 1, from sums accurate far off zero,
// and split-across-parts equal to the whole; the value loss's gradient against finite differences, a
// hand-worked case and parts adding up to the whole.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "rl/ppo.hpp"

namespace zt::rl {
namespace {

const std::vector<std::int64_t> kOffsets = {0, 3, 4, 8};  // responses of 3, 1 and 4 tokens

TEST(TokenRewards, TheScoreSitsOnEachResponsesLastToken) {
  const std::vector<float> scores = {1.0f, -0.5f, 2.0f};
  const TokenRewards r = token_rewards(kOffsets, scores, {}, {}, KlEstimator::kK1, 0.0);
  EXPECT_EQ(r.rewards, (std::vector<float>{0, 0, 1.0f, -0.5f, 0, 0, 0, 2.0f}));
  EXPECT_EQ(r.kl_mean_sum, 0.0);
}

TEST(TokenRewards, EveryTokenPaysTheKlPenalty) {
  const std::vector<float> scores = {1.0f, -0.5f, 2.0f};
  const std::vector<float> old = {-1, -2, -0.5f, -1, -3, -0.2f, -1.5f, -0.7f};
  const std::vector<float> ref = {-1.2f, -1.5f, -0.5f, -1.4f, -2.0f, -0.3f, -1.5f, -1.1f};
  for (KlEstimator est : {KlEstimator::kK1, KlEstimator::kK3}) {
    const TokenRewards r = token_rewards(kOffsets, scores, old, ref, est, 0.1);
    double kl_mean_sum = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      double kl_sum = 0;
      for (std::int64_t k = kOffsets[i]; k < kOffsets[i + 1]; ++k) {
        const double d = static_cast<double>(ref[k]) - old[k];  // log(ref / pi)
        const double kl = est == KlEstimator::kK1 ? -d : std::exp(d) - d - 1;
        const double score = k == kOffsets[i + 1] - 1 ? scores[i] : 0.0;
        EXPECT_NEAR(r.rewards[k], score - 0.1 * kl, 1e-6) << "token " << k;
        kl_sum += kl;
      }
      kl_mean_sum += kl_sum / static_cast<double>(kOffsets[i + 1] - kOffsets[i]);
    }
    EXPECT_NEAR(r.kl_mean_sum, kl_mean_sum, 1e-9);
  }
}

TEST(TokenRewards, RefusesMismatchedInputs) {
  const std::vector<float> two = {1, 2}, three = {1, 2, 3};
  EXPECT_THROW(token_rewards(kOffsets, two, {}, {}, KlEstimator::kK1, 0.0), Error);  // 2 scores, 3 responses
  EXPECT_THROW(token_rewards(kOffsets, three, three, three, KlEstimator::kK1, 0.1), Error);  // 3 log-probs, 8 tokens
  const std::vector<std::int64_t> empty_response = {0, 2, 2};
  EXPECT_THROW(token_rewards(empty_response, two, {}, {}, KlEstimator::kK1, 0.0), Error);
}

const std::vector<float> kRewards = {0.1f, -0.2f, 1.0f, 0.5f, 0.0f, 0.3f, -0.1f, 2.0f};
const std::vector<float> kValues = {0.4f, 0.6f, 0.9f, 0.2f, 1.1f, 0.8f, 1.3f, 1.7f};

// gamma = lambda = 1: the return is the reward-to-go (the sum of the rewards from t to the response's
// end) and the advantage that minus the value.
TEST(Gae, GammaAndLambdaOneGiveTheRewardToGo) {
  const Gae g = gae(kOffsets, kRewards, kValues, 1.0, 1.0);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::int64_t k = kOffsets[i]; k < kOffsets[i + 1]; ++k) {
      double to_go = 0;
      for (std::int64_t j = k; j < kOffsets[i + 1]; ++j) to_go += kRewards[j];
      EXPECT_NEAR(g.returns[k], to_go, 1e-6) << "token " << k;
      EXPECT_NEAR(g.advantages[k], to_go - kValues[k], 1e-6) << "token " << k;
    }
}

// lambda = 0: each advantage is its one-step TD error r_t + gamma v_{t+1} - v_t, with no value past a
// response's last token (the next response's first value does not leak in).
TEST(Gae, LambdaZeroGivesTheTdError) {
  const double gamma = 0.9;
  const Gae g = gae(kOffsets, kRewards, kValues, gamma, 0.0);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::int64_t k = kOffsets[i]; k < kOffsets[i + 1]; ++k) {
      const double next = k + 1 < kOffsets[i + 1] ? kValues[k + 1] : 0.0;
      EXPECT_NEAR(g.advantages[k], kRewards[k] + gamma * next - kValues[k], 1e-6) << "token " << k;
      EXPECT_NEAR(g.returns[k], g.advantages[k] + kValues[k], 1e-6) << "token " << k;
    }
}

// r = (0.1, 1), v = (0.5, 0.7), gamma 0.9, lambda 0.8: A_1 = 1 - 0.7 = 0.3; delta_0 = 0.1 + 0.9 * 0.7 -
// 0.5 = 0.23, A_0 = 0.23 + 0.72 * 0.3 = 0.446; returns 0.946 and 1.0; a one-token response: A = r - v.
TEST(Gae, AHandWorkedCase) {
  const std::vector<std::int64_t> offsets = {0, 2, 3};
  const std::vector<float> r = {0.1f, 1.0f, 2.0f}, v = {0.5f, 0.7f, 0.5f};
  const Gae g = gae(offsets, r, v, 0.9, 0.8);
  EXPECT_NEAR(g.advantages[0], 0.446, 1e-6);
  EXPECT_NEAR(g.advantages[1], 0.3, 1e-6);
  EXPECT_NEAR(g.advantages[2], 1.5, 1e-6);
  EXPECT_NEAR(g.returns[0], 0.946, 1e-6);
  EXPECT_NEAR(g.returns[1], 1.0, 1e-6);
  EXPECT_NEAR(g.returns[2], 2.0, 1e-6);
  const WhiteningSums s = whitening_sums(g.advantages);
  EXPECT_EQ(g.sums.count, 3);
  EXPECT_EQ(g.sums.sum, s.sum);
  EXPECT_EQ(g.sums.sum_sq, s.sum_sq);
  EXPECT_THROW(gae(offsets, r, std::span(v).first(2), 0.9, 0.8), Error);
}

// The reference whitening, two-pass in double as verl's masked_whiten writes it.
std::vector<double> two_pass_whitened(const std::vector<float>& x) {
  const double n = static_cast<double>(x.size());
  double mean = 0, sq = 0;
  for (float v : x) mean += v;
  mean /= n + 1e-8;
  for (float v : x) sq += (v - mean) * (v - mean);
  const double var = sq / (n + 1e-8) * n / (n - 1);
  std::vector<double> out;
  for (float v : x) out.push_back((v - mean) / std::sqrt(var + 1e-8));
  return out;
}

std::vector<float> spread(float offset) {
  std::vector<float> x;
  for (int k = 0; k < 37; ++k) x.push_back(offset + 0.25f * std::sin(1.7f * static_cast<float>(k)) + 0.01f * static_cast<float>(k));
  return x;
}

TEST(Whiten, GivesMeanZeroAndUnbiasedVarianceOne) {
  std::vector<float> x = spread(0.3f);
  whiten(x, whitening_sums(x));
  double mean = 0, sq = 0;
  for (float v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (float v : x) sq += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, 0.0, 1e-6);
  EXPECT_NEAR(sq / static_cast<double>(x.size() - 1), 1.0, 1e-5);
}

// From sums in double: still the two-pass result when the mean is far above the spread (offset 1000,
// spread ~0.3: the sum of squares cancels ~7 of double's ~16 digits).
TEST(Whiten, FromSumsEqualsTheTwoPassFormula) {
  for (float offset : {0.0f, -3.0f, 1000.0f}) {
    std::vector<float> x = spread(offset);
    const std::vector<double> want = two_pass_whitened(x);
    whiten(x, whitening_sums(x));
    for (std::size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(x[k], want[k], 2e-5) << "offset " << offset << " token " << k;
  }
}

// A batch split over ranks: each part's sums, summed (the all-reduce), whiten each part as the whole.
TEST(Whiten, PartsWithTheSummedSumsEqualTheWhole) {
  const std::vector<float> whole = spread(0.7f);
  std::vector<float> want = whole;
  whiten(want, whitening_sums(whole));
  const std::vector<std::size_t> cuts = {0, 5, 6, 20, whole.size()};  // parts of 5, 1, 14 and 17 tokens
  WhiteningSums total;
  for (std::size_t p = 0; p + 1 < cuts.size(); ++p)
    total += whitening_sums(std::span(whole).subspan(cuts[p], cuts[p + 1] - cuts[p]));
  EXPECT_EQ(total.count, static_cast<double>(whole.size()));
  for (std::size_t p = 0; p + 1 < cuts.size(); ++p) {
    std::vector<float> part(whole.begin() + static_cast<std::ptrdiff_t>(cuts[p]),
                            whole.begin() + static_cast<std::ptrdiff_t>(cuts[p + 1]));
    whiten(part, total);
    for (std::size_t k = 0; k < part.size(); ++k) EXPECT_NEAR(part[k], want[cuts[p] + k], 1e-6) << "token " << cuts[p] + k;
  }
}

TEST(Whiten, RefusesFewerThanTwoTokens) {
  std::vector<float> one = {0.5f};
  EXPECT_THROW(whiten(one, whitening_sums(one)), Error);
}

// Eight tokens in responses of 3, 1 and 4: values inside the clip range (both squares equal), past it
// with the clipped square larger (no gradient) and with the unclipped one larger, on both sides; none
// within the finite-difference step of a kink.
struct ValueCase {
  std::vector<float> values = {1.00f, 1.50f, 1.50f, 0.20f, -0.40f, 2.10f, 0.95f, 0.30f};
  std::vector<float> old = {0.90f, 1.00f, 1.00f, 0.25f, 0.00f, 1.50f, 1.00f, 0.80f};
  std::vector<float> returns = {0.50f, 2.00f, 1.00f, 0.90f, 0.40f, 1.00f, 0.10f, 0.00f};
};

TEST(ValueLoss, GradientIsTheLossesFiniteDifferences) {
  const ValueCase v;
  for (Aggregation agg : {Aggregation::kTokenMean, Aggregation::kSeqMeanTokenMean, Aggregation::kSeqMeanTokenSum}) {
    const ValueObjective o{.clip = 0.2, .aggregation = agg};
    const ValueLoss l = value_loss(o, {kOffsets, v.values, v.old, v.returns});
    EXPECT_GT(l.clipped_tokens, 0);
    EXPECT_LT(l.clipped_tokens, 8);
    for (std::size_t k = 0; k < 8; ++k) {
      std::vector<float> plus = v.values, minus = v.values;
      const float h = 1e-3f;
      plus[k] += h, minus[k] -= h;
      const double fd = (value_loss(o, {kOffsets, plus, v.old, v.returns}).loss -
                         value_loss(o, {kOffsets, minus, v.old, v.returns}).loss) /
                        (static_cast<double>(plus[k]) - minus[k]);
      EXPECT_NEAR(l.gradient[k], fd, 1e-5 + 1e-3 * std::abs(fd)) << "aggregation " << static_cast<int>(agg) << " token " << k;
    }
  }
}

// One response, clip 0.2, token-mean over 3 tokens (c = 1/3):
//   v 1.0, old 0.9, R 0.5: inside the range, square 0.25, gradient (v - R) / 3;
//   v 1.5, old 1.0, R 2.0: clipped to 1.2, square 0.64 > 0.25, taken: gradient 0;
//   v 1.5, old 1.0, R 1.0: clipped to 1.2, square 0.04 < 0.25: the unclipped, gradient (v - R) / 3.
// loss = 0.5 (0.25 + 0.64 + 0.25) / 3 = 0.19; clip fraction 1/3.
TEST(ValueLoss, AHandWorkedCase) {
  const std::vector<std::int64_t> offsets = {0, 3};
  const std::vector<float> values = {1.0f, 1.5f, 1.5f}, old = {0.9f, 1.0f, 1.0f}, returns = {0.5f, 2.0f, 1.0f};
  const ValueLoss l = value_loss({.clip = 0.2}, {offsets, values, old, returns});
  EXPECT_NEAR(l.loss, 0.19, 1e-6);
  EXPECT_NEAR(l.gradient[0], 0.5 / 3, 1e-6);
  EXPECT_EQ(l.gradient[1], 0.0f);
  EXPECT_NEAR(l.gradient[2], 0.5 / 3, 1e-6);
  EXPECT_EQ(l.clipped_tokens, 1);
  EXPECT_DOUBLE_EQ(l.clip_fraction, 1.0 / 3);
}

// A mini-batch in two parts (micro-batches or ranks) with the whole's totals: losses and clipped counts
// add up to the whole's and each token keeps its gradient, for every aggregation.
TEST(ValueLoss, PartsWithTheWholesTotalsAddUpToTheWhole) {
  const ValueCase v;
  const std::vector<std::int64_t> first = {0, 3, 4}, second = {0, 4};
  for (Aggregation agg : {Aggregation::kTokenMean, Aggregation::kSeqMeanTokenMean, Aggregation::kSeqMeanTokenSum}) {
    const ValueObjective o{.clip = 0.2, .aggregation = agg};
    const ValueLoss whole = value_loss(o, {kOffsets, v.values, v.old, v.returns});
    const auto part = [&](std::span<const std::int64_t> offsets, std::size_t from, std::size_t n) {
      return value_loss(o, {offsets, std::span(v.values).subspan(from, n), std::span(v.old).subspan(from, n),
                            std::span(v.returns).subspan(from, n), 8, 3});
    };
    const ValueLoss a = part(first, 0, 4), b = part(second, 4, 4);
    EXPECT_NEAR(a.loss + b.loss, whole.loss, 1e-12);
    EXPECT_EQ(a.clipped_tokens + b.clipped_tokens, whole.clipped_tokens);
    for (std::size_t k = 0; k < 8; ++k)
      EXPECT_FLOAT_EQ(k < 4 ? a.gradient[k] : b.gradient[k - 4], whole.gradient[k]) << "token " << k;
  }
}

TEST(ValueLoss, RefusesMismatchedInputs) {
  const ValueCase v;
  EXPECT_THROW(value_loss({}, {kOffsets, std::span(v.values).first(7), v.old, v.returns}), Error);
  EXPECT_THROW(value_loss({.clip = -0.1}, {kOffsets, v.values, v.old, v.returns}), Error);
}

}  // namespace
}  // namespace zt::rl
