// RL's batch rules: the layouts that divide pass and describe themselves per job and per rank; each that
// does not is refused naming every factor and the nearest valid values, verl's report case included
// (batch 256, mini-batch 128, micro-batch 128 on 2 ranks).
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "rl/batch_rules.hpp"

namespace zt::rl {
namespace {

std::string refusal(const BatchLayout& b) {
  try {
    check_batch_layout(b);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(BatchRules, AValidLayoutDescribesItself) {
  const BatchLayout b{.batch = 256, .group = 4, .mini_batch = 64, .micro_batch = 8, .dp = 4};
  EXPECT_EQ(refusal(b), "");
  EXPECT_EQ(b.steps_per_epoch(), 4);
  EXPECT_EQ(b.sequences_per_rank_step(), 64);
  EXPECT_EQ(b.micro_batches_per_step(), 8);
  EXPECT_EQ(describe(b), "rl: 256 prompts x 4 responses = 1024 sequences an iteration; 4 optimizer step(s) an epoch, "
                         "each 64 prompts = 256 sequences over 4 rank(s), 64 a rank in 8 forward pass(es) of 8");
}

TEST(BatchRules, VerlsReportCaseIsNamedWithItsFixes) {
  // PPO (one response a prompt): 128 prompts a step on 2 ranks are 64 sequences a rank, not 128.
  const std::string e = refusal({.batch = 256, .group = 1, .mini_batch = 128, .micro_batch = 128, .dp = 2});
  EXPECT_NE(e.find("rl.batch=256 prompts, rl.group_size=1, rl.mini_batch=128 prompts, train.micro_batch=128 sequences, "
                   "2 data-parallel ranks"), std::string::npos) << e;
  EXPECT_NE(e.find("each rank runs 64 prompts x 1 responses = 64 sequences per optimizer step"), std::string::npos) << e;
  EXPECT_NE(e.find("use train.micro_batch=64, or rl.mini_batch=256"), std::string::npos) << e;
}

TEST(BatchRules, EveryRuleIsRefusedWithTheNearestValues) {
  std::string e = refusal({.batch = 100, .group = 4, .mini_batch = 30, .micro_batch = 4, .dp = 2});
  EXPECT_NE(e.find("use rl.mini_batch=20 or 50, or rl.batch=90 or 120"), std::string::npos) << e;
  e = refusal({.batch = 96, .group = 4, .mini_batch = 24, .micro_batch = 4, .dp = 5});
  EXPECT_NE(e.find("do not deal evenly to 5 ranks"), std::string::npos) << e;
  EXPECT_NE(e.find("no rl.mini_batch dividing rl.batch=96 does; use a rank count that divides 24"), std::string::npos) << e;
  e = refusal({.batch = 96, .group = 4, .mini_batch = 24, .micro_batch = 4, .dp = 16});
  EXPECT_NE(e.find("use rl.mini_batch=16 or 32, or a rank count that divides 24"), std::string::npos) << e;
  e = refusal({.batch = 96, .group = 3, .mini_batch = 16, .micro_batch = 5, .dp = 2});
  EXPECT_NE(e.find("= 24 sequences per optimizer step, which train.micro_batch=5 does not divide: use "
                   "train.micro_batch=4 or 6"), std::string::npos) << e;
  EXPECT_NE(refusal({.batch = 8, .group = 0, .mini_batch = 8, .micro_batch = 1}).find("rl.group_size=0 must be at least 1"),
            std::string::npos);
}

}  // namespace
}  // namespace zt::rl
