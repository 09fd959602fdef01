// The schedule and clipping follow the formulas users reproduce in PyTorch.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "optim/schedule.hpp"

namespace zt::optim {
namespace {

TEST(Schedule, WarmupIsLinearFromLrOverWarmup) {
  config::OptimConfig o;
  o.lr = 1e-3;
  o.min_lr = 1e-4;
  o.warmup_steps = 10;
  EXPECT_DOUBLE_EQ(learning_rate(o, 100, 0), 1e-4);
  EXPECT_DOUBLE_EQ(learning_rate(o, 100, 4), 5e-4);
  EXPECT_DOUBLE_EQ(learning_rate(o, 100, 9), 1e-3);
}

TEST(Schedule, CosineRunsFromLrToMinLrOverTheRest) {
  config::OptimConfig o;
  o.lr = 1e-3;
  o.min_lr = 1e-4;
  o.warmup_steps = 10;
  EXPECT_DOUBLE_EQ(learning_rate(o, 110, 10), 1e-3);
  EXPECT_NEAR(learning_rate(o, 110, 60), 0.55e-3, 1e-15);
  const double s = 105;  // progress 0.95
  EXPECT_NEAR(learning_rate(o, 110, s), 1e-4 + 0.5 * 0.9e-3 * (1 + std::cos(std::numbers::pi * 0.95)), 1e-15);
  EXPECT_DOUBLE_EQ(learning_rate(o, 110, 200), 1e-4);  // past max_steps: min_lr
}

TEST(Schedule, ConstantKeepsLrAndZeroWarmupStartsAtLr) {
  config::OptimConfig o;
  o.lr = 3e-4;
  o.warmup_steps = 0;
  o.schedule = config::Schedule::kConstant;
  EXPECT_DOUBLE_EQ(learning_rate(o, 10, 0), 3e-4);
  EXPECT_DOUBLE_EQ(learning_rate(o, 10, 9), 3e-4);
}

// Warmup-stable-decay (decay_fraction < 1): lr until the last D = fraction x (max_steps - warmup) steps,
// then each shape from lr toward min_lr, as torchtitan's linear/sqrt/cosine decay types.
TEST(Schedule, DecayFractionKeepsLrStableThenDecaysInEachShape) {
  config::OptimConfig o;
  o.lr = 1e-3;
  o.min_lr = 1e-4;
  o.warmup_steps = 10;
  o.decay_fraction = 0.2;  // 100 steps after warm-up: stable 10-89, decay 90-109
  for (const config::Schedule s : {config::Schedule::kCosine, config::Schedule::kLinear, config::Schedule::kSqrt}) {
    o.schedule = s;
    EXPECT_DOUBLE_EQ(learning_rate(o, 110, 9), 1e-3);
    EXPECT_DOUBLE_EQ(learning_rate(o, 110, 50), 1e-3);
    EXPECT_DOUBLE_EQ(learning_rate(o, 110, 89), 1e-3);
    EXPECT_DOUBLE_EQ(learning_rate(o, 110, 90), 1e-3);  // p = 0
    EXPECT_DOUBLE_EQ(learning_rate(o, 110, 110), 1e-4);
  }
  const double p = 5.0 / 20.0;  // step 95
  o.schedule = config::Schedule::kLinear;
  EXPECT_NEAR(learning_rate(o, 110, 95), 1e-4 + 0.9e-3 * (1 - p), 1e-15);
  o.schedule = config::Schedule::kSqrt;
  EXPECT_NEAR(learning_rate(o, 110, 95), 1e-4 + 0.9e-3 * (1 - std::sqrt(p)), 1e-15);
  o.schedule = config::Schedule::kCosine;
  EXPECT_NEAR(learning_rate(o, 110, 95), 1e-4 + 0.45e-3 * (1 + std::cos(std::numbers::pi * p)), 1e-15);
  o.decay_fraction = 1;  // the whole run after warm-up: the cosine above
  EXPECT_NEAR(learning_rate(o, 110, 60), 0.55e-3, 1e-15);
  o.schedule = config::Schedule::kLinear;
  EXPECT_NEAR(learning_rate(o, 110, 60), 0.55e-3, 1e-15);
  o.decay_fraction = 0.001;  // rounds to no decay step: lr throughout
  EXPECT_DOUBLE_EQ(learning_rate(o, 110, 109), 1e-3);
}

TEST(Clip, MatchesTorchClipGradNorm) {
  EXPECT_DOUBLE_EQ(clip_factor(0.5, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_factor(4.0, 1.0), 1.0 / (4.0 + 1e-6));
  EXPECT_DOUBLE_EQ(clip_factor(1e9, 0.0), 1.0);  // 0 = off
}

// A norm assembled over ranks (TP shards, pipeline stages): a sum a hair below 0 is 0, and an overflow
// (inf or NaN in any part) stays non-finite, so the loss scaler skips the step on every rank.
TEST(Clip, NormFromSumOfSquaresKeepsOverflowVisible) {
  EXPECT_DOUBLE_EQ(norm_from_sum_of_squares(6.25), 2.5);
  EXPECT_DOUBLE_EQ(norm_from_sum_of_squares(-1e-18), 0.0);
  EXPECT_TRUE(std::isnan(norm_from_sum_of_squares(std::nan(""))));
  EXPECT_TRUE(std::isinf(norm_from_sum_of_squares(INFINITY)));
}

}  // namespace
}  // namespace zt::optim
