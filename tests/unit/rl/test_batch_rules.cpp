// RL's batch rules: the layouts that divide pass and describe themselves per job and per rank; each that
// does not is refused naming every factor and the nearest valid values, verl's report case included
// (batch 256, mini-batch 128, micro-batch 128 on 2 ranks).
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
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
  EXPECT_NE(e.find("responses kept on one rank: use 4 or 6 ranks"), std::string::npos) << e;  // no rl.mini_batch will do
  e = refusal({.batch = 96, .group = 4, .mini_batch = 24, .micro_batch = 4, .dp = 16});
  EXPECT_NE(e.find("use rl.mini_batch=16 or 32, or 12 or 24 ranks"), std::string::npos) << e;
  e = refusal({.batch = 96, .group = 3, .mini_batch = 16, .micro_batch = 5, .dp = 2});
  EXPECT_NE(e.find("= 24 sequences per optimizer step, which train.micro_batch=5 does not divide: use "
                   "train.micro_batch=4 or 6"), std::string::npos) << e;
  EXPECT_NE(refusal({.batch = 8, .group = 0, .mini_batch = 8, .micro_batch = 1}).find("rl.group_size=0 must be at least 1"),
            std::string::npos);
}

// Each value offered meets every rule (outside sweep 37 F2: a value offered for one rule was refused by
// another, all four in one case): every refusal of a small layout, its offers tried one by one, and an
// offer of several keys together.
TEST(BatchRules, EveryOfferedValueMeetsEveryRule) {
  const std::regex one("(rl\\.mini_batch|rl\\.batch|train\\.micro_batch)=([0-9]+)(?: or ([0-9]+))?");
  const std::regex ranks("use ([0-9]+)(?: or ([0-9]+))? ranks?|or ([0-9]+)(?: or ([0-9]+))? ranks?");
  int refused = 0;
  for (std::int64_t batch = 1; batch <= 12; ++batch)
    for (std::int64_t group = 1; group <= 3; ++group)
      for (std::int64_t mini = 1; mini <= 12; ++mini)
        for (std::int64_t micro = 1; micro <= 6; ++micro)
          for (int dp = 1; dp <= 4; ++dp) {
            const BatchLayout b{.batch = batch, .group = group, .mini_batch = mini, .micro_batch = micro, .dp = dp};
            const std::string e = refusal(b);
            if (e.empty()) continue;
            ++refused;
            const std::size_t at = e.find(": use ") != std::string::npos ? e.find(": use ") : e.find(": no one key");
            ASSERT_NE(at, std::string::npos) << e;
            const std::string offer = e.substr(at);
            const auto with = [&](BatchLayout c, const std::string& key, std::int64_t v) {
              (key == "rl.mini_batch" ? c.mini_batch : key == "rl.batch" ? c.batch : c.micro_batch) = v;
              return c;
            };
            const bool together = offer.find("together: ") != std::string::npos;
            BatchLayout all = b;
            int offers = 0;
            for (auto it = std::sregex_iterator(offer.begin(), offer.end(), one); it != std::sregex_iterator(); ++it)
              for (int g : {2, 3}) {
                if (!(*it)[g].matched) continue;
                ++offers;
                if (together) {
                  all = with(all, (*it)[1], std::stoll((*it)[g]));
                } else {
                  EXPECT_EQ(refusal(with(b, (*it)[1], std::stoll((*it)[g]))), "") << e << "\n-> " << (*it)[1] << "=" << (*it)[g];
                }
              }
            for (auto it = std::sregex_iterator(offer.begin(), offer.end(), ranks); it != std::sregex_iterator(); ++it)
              for (int g = 1; g <= 4; ++g) {
                if (!(*it)[g].matched) continue;
                ++offers;
                BatchLayout c = b;
                c.dp = std::stoi((*it)[g]);
                EXPECT_EQ(refusal(c), "") << e << "\n-> " << c.dp << " ranks";
              }
            if (together) {
              EXPECT_EQ(refusal(all), "") << e;
            }
            EXPECT_GT(offers, 0) << e;
          }
  EXPECT_GT(refused, 1000);
  // The sweep's first case: none of the four values it was offered worked.
  const std::string e = refusal({.batch = 10, .group = 1, .mini_batch = 4, .micro_batch = 4, .dp = 2});
  EXPECT_NE(e.find("no one key changed alone will do; together: rl.mini_batch=2, train.micro_batch=1"), std::string::npos) << e;
}

// A refusal at the largest values the keys take is instant (outside sweep 37 F3: 5 minutes, a walk over
// every divisor candidate up to 6.9e10).
TEST(BatchRules, ARefusalAtTheLargestValuesIsInstant) {
  const auto start = std::chrono::steady_clock::now();
  const std::string e = refusal({.batch = 16777216, .group = 4096, .mini_batch = 16777216, .micro_batch = 3, .dp = 1});
  EXPECT_NE(e.find("which train.micro_batch=3 does not divide: use train.micro_batch=2 or 4"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

}  // namespace
}  // namespace zt::rl
