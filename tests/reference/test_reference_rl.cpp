// RL's objectives (src/rl/objectives) against rl_reference.py, verl's formulas on padded tensors with a
// response mask and autograd: for GRPO and GSPO, each aggregation, without KL and with k1 and k3, the loss,
// its policy and KL parts, the clip fraction and minus the weights (the gradient in each token's log p)
// within fp32 rounding of the float inputs; GRPO's group advantages, Dr. GRPO's, and groups of one.
// PPO (rl/ppo): the vanilla policy loss with per-token advantages; token-level rewards (k1 and k3 KL
// penalties), GAE's whitened advantages and returns for three (gamma, lambda); the clipped value loss, its
// clip fraction and its gradient in each value, for each aggregation and two clip ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "golden.hpp"
#include "rl/objectives.hpp"
#include "rl/ppo.hpp"

namespace zt::reference {
namespace {

class ReferenceRl : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip;
    g_ = golden_of("rl_reference.py", ZT_REFERENCE_OUT "/rl_golden.safetensors", skip);
    if (!g_) GTEST_SKIP() << skip;
  }
  const Golden* g_ = nullptr;
};

TEST_F(ReferenceRl, ObjectivesAndTheirGradientsAreVerls) {
  const std::vector<std::int32_t> offsets32 = g_->i32("offsets");
  const std::vector<std::int64_t> offsets(offsets32.begin(), offsets32.end());
  const int cases = g_->i32("cases")[0];
  ASSERT_EQ(cases, 18);
  for (int c = 0; c < cases; ++c) {
    const std::string p = "case" + std::to_string(c) + ".";
    const std::vector<std::int32_t> s = g_->i32(p + "settings");
    const std::vector<double> num = g_->f64(p + "numbers"), out = g_->f64(p + "out"), grad = g_->f64(p + "grad");
    SCOPED_TRACE(p + " algorithm " + std::to_string(s[0]) + " aggregation " + std::to_string(s[1]) + " kl " + std::to_string(s[2]));
    rl::Objective o{.algorithm = s[0] == 0 ? rl::Algorithm::kGrpo : rl::Algorithm::kGspo, .clip_low = num[1],
                    .clip_high = num[2], .kl_coef = num[0], .kl = s[2] == 1 ? rl::KlEstimator::kK1 : rl::KlEstimator::kK3,
                    .aggregation = static_cast<rl::Aggregation>(s[1])};
    const std::vector<float> logp = g_->f32(p + "logp"), old = g_->f32(p + "old"), ref = g_->f32(p + "ref"),
                             adv = g_->f32(p + "adv");
    const rl::Evaluated e = rl::evaluate(o, {offsets, logp, old, ref, adv});
    EXPECT_NEAR(e.loss, out[0], 1e-5 * (1 + std::abs(out[0])));
    EXPECT_NEAR(e.policy_loss, out[1], 1e-5 * (1 + std::abs(out[1])));
    if (s[2] != 0) {
      EXPECT_NEAR(e.kl, out[2], 1e-5 * (1 + std::abs(out[2])));
    }
    EXPECT_NEAR(e.clip_fraction, out[3], 1e-12);
    ASSERT_EQ(e.weights.size(), grad.size());
    for (std::size_t k = 0; k < grad.size(); ++k) EXPECT_NEAR(-e.weights[k], grad[k], 1e-5 * (1 + std::abs(grad[k]))) << "token " << k;
  }
}

TEST_F(ReferenceRl, GroupAdvantagesAreVerls) {
  const std::vector<float> rewards = g_->f32("rewards");
  const auto check = [&](const std::vector<float>& got, const std::string& name) {
    const std::vector<double> want = g_->f64(name);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << name << " " << i;
  };
  check(rl::group_advantages(rewards, 4, true), "grpo_adv");
  check(rl::group_advantages(rewards, 4, false), "drgrpo_adv");
  check(rl::group_advantages(rewards, 1, true), "single_adv");
}

// Every element of `got` within 1e-5 (relative, absolute near 0) of the golden `name`.
void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, const std::string& name) {
  ASSERT_EQ(got.size(), want.size()) << name;
  for (std::size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5 * (1 + std::abs(want[k]))) << name << " " << k;
}

std::vector<std::int64_t> ppo_offsets(const Golden& g) {
  const std::vector<std::int32_t> o = g.i32("ppo_offsets");
  return {o.begin(), o.end()};
}

TEST_F(ReferenceRl, PpoPolicyLossWithPerTokenAdvantagesIsVerls) {
  const std::vector<std::int64_t> offsets = ppo_offsets(*g_);
  const int cases = g_->i32("ppo_cases")[0];
  ASSERT_EQ(cases, 6);
  for (int c = 0; c < cases; ++c) {
    const std::string p = "ppo_case" + std::to_string(c) + ".";
    const std::vector<std::int32_t> s = g_->i32(p + "settings");
    const std::vector<double> num = g_->f64(p + "numbers"), out = g_->f64(p + "out");
    SCOPED_TRACE(p + " aggregation " + std::to_string(s[0]) + " kl " + std::to_string(s[1]));
    const rl::Objective o{.clip_low = num[1], .clip_high = num[2], .kl_coef = num[0], .kl = rl::KlEstimator::kK3,
                          .aggregation = static_cast<rl::Aggregation>(s[0])};
    const std::vector<float> logp = g_->f32(p + "logp"), old = g_->f32(p + "old"), ref = g_->f32(p + "ref"),
                             adv = g_->f32(p + "adv");
    const rl::Evaluated e = rl::evaluate(o, {offsets, logp, old, ref, {}, 0, 0, adv});
    EXPECT_NEAR(e.loss, out[0], 1e-5 * (1 + std::abs(out[0])));
    EXPECT_NEAR(e.policy_loss, out[1], 1e-5 * (1 + std::abs(out[1])));
    EXPECT_NEAR(e.clip_fraction, out[3], 1e-12);
    std::vector<float> minus_weights;
    for (float w : e.weights) minus_weights.push_back(-w);
    expect_near_all(minus_weights, g_->f64(p + "grad"), p + "grad");
  }
}

TEST_F(ReferenceRl, PpoRewardsAndGaeAreVerls) {
  const std::vector<std::int64_t> offsets = ppo_offsets(*g_);
  const int cases = g_->i32("gae_cases")[0];
  ASSERT_EQ(cases, 9);
  for (int c = 0; c < cases; ++c) {
    const std::string p = "gae_case" + std::to_string(c) + ".";
    const int kind = g_->i32(p + "settings")[0];
    const std::vector<double> num = g_->f64(p + "numbers");
    SCOPED_TRACE(p + " kl " + std::to_string(kind) + " gamma " + std::to_string(num[0]) + " lambda " + std::to_string(num[1]));
    const std::vector<float> scores = g_->f32(p + "scores"), old = g_->f32(p + "old"), ref = g_->f32(p + "ref"),
                             values = g_->f32(p + "values");
    const rl::TokenRewards r = rl::token_rewards(offsets, scores, old, ref,
                                                 kind == 2 ? rl::KlEstimator::kK3 : rl::KlEstimator::kK1, num[2]);
    expect_near_all(r.rewards, g_->f64(p + "rewards"), p + "rewards");
    const double kl_metric = g_->f64(p + "kl_metric")[0];
    EXPECT_NEAR(r.kl_mean_sum / static_cast<double>(scores.size()), kl_metric, 1e-5 * (1 + std::abs(kl_metric)));
    rl::Gae g = rl::gae(offsets, r.rewards, values, num[0], num[1]);
    expect_near_all(g.returns, g_->f64(p + "returns"), p + "returns");
    rl::whiten(g.advantages, g.sums);
    expect_near_all(g.advantages, g_->f64(p + "advantages"), p + "advantages");
  }
}

TEST_F(ReferenceRl, ValueLossAndItsGradientAreVerls) {
  const std::vector<std::int64_t> offsets = ppo_offsets(*g_);
  const int cases = g_->i32("value_cases")[0];
  ASSERT_EQ(cases, 6);
  for (int c = 0; c < cases; ++c) {
    const std::string p = "value_case" + std::to_string(c) + ".";
    const int agg = g_->i32(p + "settings")[0];
    const double clip = g_->f64(p + "numbers")[0];
    SCOPED_TRACE(p + " aggregation " + std::to_string(agg) + " clip " + std::to_string(clip));
    const std::vector<float> vpreds = g_->f32(p + "vpreds"), values = g_->f32(p + "values"),
                             returns = g_->f32(p + "returns");
    const std::vector<double> out = g_->f64(p + "out");
    const rl::ValueLoss l = rl::value_loss({.clip = clip, .aggregation = static_cast<rl::Aggregation>(agg)},
                                           {offsets, vpreds, values, returns});
    EXPECT_NEAR(l.loss, out[0], 1e-5 * (1 + std::abs(out[0])));
    EXPECT_NEAR(l.clip_fraction, out[1], 1e-7);  // verl's masked_mean divides by count + 1e-8
    expect_near_all(l.gradient, g_->f64(p + "grad"), p + "grad");
  }
}

}  // namespace
}  // namespace zt::reference
