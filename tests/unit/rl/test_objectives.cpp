// RL's objectives: GRPO's group advantages by hand; every objective's per-token weights against central
// finite differences of its value in each token's log-probability (GRPO and GSPO, advantages of both
// signs, ratios inside and outside the clip range and past the dual clip, KL k1 and k3, the three
// aggregations); the values of a hand-worked case; per-token advantages (PPO) against the per-response
// case and finite differences; the entropy bonus's value and per-token weights (its finite differences in
// each token's entropy), in parts as in the whole.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "rl/objectives.hpp"

namespace zt::rl {
namespace {

TEST(GroupAdvantages, CentredAndScaledByTheUnbiasedStd) {
  const std::vector<float> r = {1, 0, 0, 1, 2, 2, 2, 2};
  const std::vector<float> a = group_advantages(r, 4);
  const double std = std::sqrt((4 * 0.25) / 3.0);  // group 1: mean 0.5, each 0.5 away
  EXPECT_NEAR(a[0], 0.5 / (std + 1e-6), 1e-6);
  EXPECT_NEAR(a[1], -0.5 / (std + 1e-6), 1e-6);
  for (int k = 4; k < 8; ++k) EXPECT_EQ(a[k], 0.0f);  // one reward for the whole group: no signal
  EXPECT_NEAR(group_advantages(r, 1)[4], 2 / (1 + 1e-6), 1e-6);  // verl: a group of one keeps its reward
  const std::vector<float> dr = group_advantages(r, 4, false);  // Dr. GRPO
  EXPECT_FLOAT_EQ(dr[0], 0.5f);
  EXPECT_THROW(group_advantages(r, 3), Error);
}

struct Case {
  std::string name;
  Objective o;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  std::vector<Case> all;
  for (Algorithm alg : {Algorithm::kGrpo, Algorithm::kGspo})
    for (Aggregation agg : {Aggregation::kTokenMean, Aggregation::kSeqMeanTokenMean, Aggregation::kSeqMeanTokenSum})
      for (double kl : {0.0, 0.1})
        for (KlEstimator est : {KlEstimator::kK1, KlEstimator::kK3}) {
          if (kl == 0 && est == KlEstimator::kK1) continue;
          Objective o{alg, 0.2, 0.28, kl, est, agg};
          all.push_back({std::string(alg == Algorithm::kGrpo ? "grpo" : "gspo") + "_agg" +
                             std::to_string(static_cast<int>(agg)) + (kl == 0 ? "" : est == KlEstimator::kK1 ? "_k1" : "_k3"),
                         o});
        }
  return all;
}

class Weights : public ::testing::TestWithParam<Case> {};

// Five responses of 3, 1, 4, 2 and 5 tokens; log-ratios that put tokens inside the clip range, beyond it
// on both sides, and (A < 0, ratio e^1.5) past the dual clip of 3.
TEST_P(Weights, AreMinusTheObjectivesFiniteDifferences) {
  const Objective o = GetParam().o;
  const std::vector<std::int64_t> offsets = {0, 3, 4, 8, 10, 15};
  const std::vector<float> adv = {1.3f, -0.7f, 0.4f, -1.1f, 0.9f};
  const std::vector<float> log_ratio = {0.05f, -0.4f, 0.3f, 0.1f, -0.02f, 0.5f, -0.3f, 0.15f,
                                        1.5f,  0.04f, 0.0f, -0.1f, 0.25f, -0.6f, 0.08f};
  std::vector<float> old(15), logp(15), ref(15);
  for (int k = 0; k < 15; ++k) {
    old[k] = -1.0f - 0.13f * static_cast<float>(k);
    logp[k] = old[k] + log_ratio[k];
    ref[k] = logp[k] + 0.3f * std::sin(static_cast<float>(k));
  }
  auto value = [&](const std::vector<float>& lp) {
    return evaluate(o, {offsets, lp, old, ref, adv}).loss;
  };
  const Evaluated e = evaluate(o, {offsets, logp, old, ref, adv});
  EXPECT_NEAR(e.loss, e.policy_loss + o.kl_coef * e.kl, 1e-12);
  for (int k = 0; k < 15; ++k) {
    std::vector<float> plus = logp, minus = logp;
    const float h = 1e-3f;
    plus[k] += h, minus[k] -= h;
    const double fd = (value(plus) - value(minus)) / (static_cast<double>(plus[k]) - minus[k]);
    EXPECT_NEAR(-e.weights[k], fd, 2e-4 + 1e-3 * std::abs(fd)) << "token " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Objectives, Weights, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// One response of two tokens, A = 1, ratios e^0.1 and e^0.5 (the second clipped at 1.28), token-mean:
// loss = (-e^0.1 - 1.28) / 2; weights (A r_1 / 2, 0); clip fraction 1/2.
TEST(Objective, AHandWorkedCase) {
  const std::vector<std::int64_t> offsets = {0, 2};
  const std::vector<float> old = {-1.0f, -2.0f}, logp = {-0.9f, -1.5f}, adv = {1.0f};
  const Evaluated e = evaluate({.clip_low = 0.2, .clip_high = 0.28}, {offsets, logp, old, {}, adv});
  const double r1 = std::exp(static_cast<double>(logp[0]) - old[0]);
  EXPECT_NEAR(e.loss, (-r1 - 1.28) / 2, 1e-6);
  EXPECT_NEAR(e.weights[0], r1 / 2, 1e-6);
  EXPECT_EQ(e.weights[1], 0.0f);
  EXPECT_DOUBLE_EQ(e.clip_fraction, 0.5);
  EXPECT_EQ(e.clipped_tokens, 1);
}

// A negative advantage far off-policy (ratio e^2 = 7.39 > 3): verl's vanilla loss (PPO, GRPO) caps the
// loss at 3|A| with no gradient (dual clip); its GSPO loss, as the paper's, keeps -A r and its gradient
// (sweep 25 F1).
TEST(Objective, TheDualClipIsPposAndGrposNotGspos) {
  const std::vector<std::int64_t> offsets = {0, 2};
  const std::vector<float> old = {-3.0f, -3.0f}, logp = {-1.0f, -1.0f}, adv = {-1.0f};
  const double r = std::exp(2.0);
  const Evaluated grpo = evaluate({.algorithm = Algorithm::kGrpo, .clip_low = 0.2, .clip_high = 0.2}, {offsets, logp, old, {}, adv});
  EXPECT_NEAR(grpo.loss, 3.0, 1e-6);
  EXPECT_EQ(grpo.weights[0], 0.0f);
  const Evaluated gspo = evaluate({.algorithm = Algorithm::kGspo, .clip_low = 0.2, .clip_high = 0.2}, {offsets, logp, old, {}, adv});
  EXPECT_NEAR(gspo.loss, r, 1e-5);
  EXPECT_NE(gspo.weights[0], 0.0f);
}

// A mini-batch evaluated in two parts (two micro-batches, or two ranks) with the whole's totals: the
// parts' losses add up to the whole's and each token keeps its weight, for every aggregation.
TEST(Objective, PartsWithTheWholesTotalsAddUpToTheWhole) {
  const std::vector<std::int64_t> offsets = {0, 3, 4, 9};
  const std::vector<float> logp = {-1, -0.5f, -2, -0.1f, -3, -1, -0.7f, -0.2f, -1.1f};
  const std::vector<float> old = {-1.1f, -0.4f, -2, -0.3f, -2.5f, -1, -0.9f, -0.2f, -1.0f};
  const std::vector<float> ref = {-1.2f, -0.6f, -1.5f, -0.2f, -3, -1.4f, -0.7f, -0.3f, -1.0f};
  const std::vector<float> adv = {0.5f, -1.0f, 1.5f};
  for (Algorithm alg : {Algorithm::kGrpo, Algorithm::kGspo})
    for (Aggregation agg : {Aggregation::kTokenMean, Aggregation::kSeqMeanTokenMean, Aggregation::kSeqMeanTokenSum}) {
      const Objective o{.algorithm = alg, .kl_coef = 0.1, .aggregation = agg};
      const Evaluated whole = evaluate(o, {offsets, logp, old, ref, adv});
      const std::vector<std::int64_t> first = {0, 3, 4}, second = {0, 5};
      const Evaluated a = evaluate(o, {first, std::span(logp).first(4), std::span(old).first(4), std::span(ref).first(4),
                                       std::span(adv).first(2), 9, 3});
      const Evaluated b = evaluate(o, {second, std::span(logp).subspan(4), std::span(old).subspan(4),
                                       std::span(ref).subspan(4), std::span(adv).subspan(2), 9, 3});
      EXPECT_NEAR(a.loss + b.loss, whole.loss, 1e-9);
      for (std::size_t k = 0; k < 9; ++k)
        EXPECT_FLOAT_EQ(k < 4 ? a.weights[k] : b.weights[k - 4], whole.weights[k]) << "token " << k;
      EXPECT_EQ(a.clipped_tokens + b.clipped_tokens, whole.clipped_tokens);
    }
}

// PPO: one advantage per token (Tokens::token_advantages). The same advantage on every token of a response
// is the per-response case exactly; varying ones keep the weights minus the finite differences, and each
// token gets its own (at ratio 1 the weights are the advantages over the token count).
TEST(Objective, PerTokenAdvantagesServePpo) {
  const std::vector<std::int64_t> offsets = {0, 3, 4, 9};
  const std::vector<float> logp = {-1, -0.5f, -2, -0.1f, -3, -1, -0.7f, -0.2f, -1.1f};
  const std::vector<float> old = {-1.1f, -0.4f, -2, -0.3f, -2.5f, -1, -0.9f, -0.2f, -1.0f};
  const std::vector<float> ref = {-1.2f, -0.6f, -1.5f, -0.2f, -3, -1.4f, -0.7f, -0.3f, -1.0f};
  const std::vector<float> adv = {0.5f, -1.0f, 1.5f}, spread = {0.5f, 0.5f, 0.5f, -1.0f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f};
  const std::vector<float> varying = {0.8f, -0.3f, 1.2f, -1.4f, -0.6f, 0.1f, 2.0f, -2.2f, 0.4f};
  for (Aggregation agg : {Aggregation::kTokenMean, Aggregation::kSeqMeanTokenMean, Aggregation::kSeqMeanTokenSum}) {
    const Objective o{.clip_low = 0.2, .clip_high = 0.28, .kl_coef = 0.1, .aggregation = agg};
    const Evaluated per_response = evaluate(o, {offsets, logp, old, ref, adv});
    const Evaluated per_token = evaluate(o, {offsets, logp, old, ref, {}, 0, 0, spread});
    EXPECT_EQ(per_token.loss, per_response.loss);
    EXPECT_EQ(per_token.weights, per_response.weights);
    const Evaluated e = evaluate(o, {offsets, logp, old, ref, {}, 0, 0, varying});
    EXPECT_GT(e.clipped_tokens, 0);
    for (std::size_t k = 0; k < 9; ++k) {
      std::vector<float> plus = logp, minus = logp;
      const float h = 1e-3f;
      plus[k] += h, minus[k] -= h;
      const double fd = (evaluate(o, {offsets, plus, old, ref, {}, 0, 0, varying}).loss -
                         evaluate(o, {offsets, minus, old, ref, {}, 0, 0, varying}).loss) /
                        (static_cast<double>(plus[k]) - minus[k]);
      EXPECT_NEAR(-e.weights[k], fd, 2e-4 + 1e-3 * std::abs(fd)) << "aggregation " << static_cast<int>(agg) << " token " << k;
    }
  }
  // At ratio 1 (logp = old), token-mean, no KL: the loss is -mean_t(A_t) and token t's weight A_t / T.
  const Evaluated at_one = evaluate({}, {offsets, old, old, {}, {}, 0, 0, varying});
  double sum = 0;
  for (std::size_t k = 0; k < 9; ++k) {
    sum += varying[k];
    EXPECT_NEAR(at_one.weights[k], varying[k] / 9.0, 1e-7) << "token " << k;
  }
  EXPECT_NEAR(at_one.loss, -sum / 9, 1e-7);
  EXPECT_THROW(evaluate({}, {offsets, logp, old, ref, adv, 0, 0, varying}), Error);  // both kinds
  EXPECT_THROW(evaluate({}, {offsets, logp, old, ref, {}, 0, 0, std::span(varying).first(8)}), Error);
}

// The entropy bonus (verl: loss = pg_loss - entropy_coeff * agg_loss(entropy)): the aggregated entropy
// and each token's d(loss)/dH_t as finite differences of the loss in H_t, for every aggregation; the
// parts of a mini-batch with the whole's totals add up; with entropy_coeff 0 the entropy is reported
// and the loss and weights are the objective's without it; a bonus without entropies is refused.
TEST(Objective, EntropyBonus) {
  const std::vector<std::int64_t> offsets = {0, 3, 4, 9};
  const std::vector<float> logp = {-1, -0.5f, -2, -0.1f, -3, -1, -0.7f, -0.2f, -1.1f};
  const std::vector<float> old = {-1.1f, -0.4f, -2, -0.3f, -2.5f, -1, -0.9f, -0.2f, -1.0f};
  const std::vector<float> adv = {0.5f, -1.0f, 1.5f};
  const std::vector<float> H = {2.0f, 0.5f, 1.25f, 3.0f, 0.1f, 0.75f, 1.5f, 2.5f, 0.3f};
  for (Aggregation agg : {Aggregation::kTokenMean, Aggregation::kSeqMeanTokenMean, Aggregation::kSeqMeanTokenSum}) {
    SCOPED_TRACE(static_cast<int>(agg));
    const Objective o{.aggregation = agg, .entropy_coeff = 0.01};
    const Objective plain{.aggregation = agg};
    const Evaluated e = evaluate(o, {offsets, logp, old, {}, adv, 0, 0, {}, H});
    const Evaluated without = evaluate(plain, {offsets, logp, old, {}, adv});
    const Evaluated reported = evaluate(plain, {offsets, logp, old, {}, adv, 0, 0, {}, H});
    EXPECT_EQ(reported.loss, without.loss);
    EXPECT_EQ(reported.weights, without.weights);
    EXPECT_TRUE(reported.entropy_weights.empty());
    EXPECT_EQ(reported.entropy, e.entropy);
    EXPECT_NEAR(e.loss, without.loss - 0.01 * e.entropy, 1e-12);
    EXPECT_EQ(e.weights, without.weights) << "the entropy term leaves the cross-entropy weights";
    const double token_mean = (2.0 + 0.5 + 1.25 + 3.0 + 0.1 + 0.75 + 1.5 + 2.5 + 0.3) / 9;
    if (agg == Aggregation::kTokenMean) {
      EXPECT_NEAR(e.entropy, token_mean, 1e-6);
    }
    ASSERT_EQ(e.entropy_weights.size(), std::size_t(9));
    for (std::size_t k = 0; k < 9; ++k) {
      std::vector<float> plus = H, minus = H;
      plus[k] += 1e-2f, minus[k] -= 1e-2f;
      const double fd = (evaluate(o, {offsets, logp, old, {}, adv, 0, 0, {}, plus}).loss -
                         evaluate(o, {offsets, logp, old, {}, adv, 0, 0, {}, minus}).loss) /
                        (static_cast<double>(plus[k]) - minus[k]);
      EXPECT_NEAR(e.entropy_weights[k], fd, 1e-7) << "token " << k;
      EXPECT_LT(e.entropy_weights[k], 0.0f) << "more entropy lowers the loss";
    }
    const std::vector<std::int64_t> first = {0, 3, 4}, second = {0, 5};
    const Evaluated a = evaluate(o, {first, std::span(logp).first(4), std::span(old).first(4), {}, std::span(adv).first(2),
                                     9, 3, {}, std::span(H).first(4)});
    const Evaluated b = evaluate(o, {second, std::span(logp).subspan(4), std::span(old).subspan(4), {},
                                     std::span(adv).subspan(2), 9, 3, {}, std::span(H).subspan(4)});
    EXPECT_NEAR(a.entropy + b.entropy, e.entropy, 1e-9);
    EXPECT_NEAR(a.loss + b.loss, e.loss, 1e-9);
  }
  EXPECT_THROW(evaluate({.entropy_coeff = 0.01}, {offsets, logp, old, {}, adv}), Error);
  EXPECT_THROW(evaluate({}, {offsets, logp, old, {}, adv, 0, 0, {}, std::span(H).first(8)}), Error);
}

}  // namespace
}  // namespace zt::rl
