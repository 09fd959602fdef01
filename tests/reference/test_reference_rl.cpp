// RL's objectives (src/rl/objectives) against rl_reference.py, verl's formulas on padded tensors with a
// response mask and autograd: for GRPO and GSPO, each aggregation, without KL and with k1 and k3, the loss,
// its policy and KL parts, the clip fraction and minus the weights (the gradient in each token's log p)
// within fp32 rounding of the float inputs; GRPO's group advantages, Dr. GRPO's, and groups of one.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "golden.hpp"
#include "rl/objectives.hpp"

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

}  // namespace
}  // namespace zt::reference
