// The straggler summary and the "persistently slower" rule, as pure functions over given times.
#include <gtest/gtest.h>

#include "health/stragglers.hpp"

namespace zt::health {
namespace {

TEST(StragglerSummary, NamesTheRankWithTheMostComputeAndTheMedians) {
  const WindowSummary s = summarize({{10, 30, 11, 12}, {5, 1, 4, 3}});
  EXPECT_EQ(s.slowest_rank, 1);
  EXPECT_DOUBLE_EQ(s.slowest_compute_ms, 30);
  EXPECT_DOUBLE_EQ(s.slowest_wait_ms, 1);
  EXPECT_DOUBLE_EQ(s.median_compute_ms, 11.5);  // even count: mean of the middle two
  EXPECT_DOUBLE_EQ(s.median_wait_ms, 3.5);
}

TEST(StragglerSummary, OddCountMedianAndLowestRankAmongEquals) {
  const WindowSummary s = summarize({{7, 9, 9}, {0, 0, 0}});
  EXPECT_EQ(s.slowest_rank, 1);
  EXPECT_DOUBLE_EQ(s.median_compute_ms, 9);
}

TEST(StragglerRule, WarnsOnceAfterTheConfiguredConsecutiveWindows) {
  StragglerRule rule(4, 0.15, 3);
  const std::vector<double> slow3{10, 10, 10, 12.3};  // rank 3: 23% above the median (10)
  EXPECT_TRUE(rule.observe(1, 100, slow3).empty());
  EXPECT_TRUE(rule.observe(101, 200, slow3).empty());
  const std::vector<StragglerEpisode> due = rule.observe(201, 300, slow3);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].rank, 3);
  EXPECT_EQ(due[0].windows, 3);
  EXPECT_EQ(due[0].first_step, 1);
  EXPECT_EQ(due[0].last_step, 300);
  EXPECT_NEAR(due[0].slower_fraction, 0.23, 1e-9);
  EXPECT_TRUE(rule.observe(301, 400, slow3).empty());  // same episode: said once
}

TEST(StragglerRule, AWindowBackUnderTheThresholdEndsTheEpisode) {
  StragglerRule rule(3, 0.15, 2);
  const std::vector<double> slow0{20, 10, 10}, even{10, 10, 10};
  EXPECT_TRUE(rule.observe(1, 1, slow0).empty());
  EXPECT_TRUE(rule.observe(2, 2, even).empty());  // the run restarts
  EXPECT_TRUE(rule.observe(3, 3, slow0).empty());
  EXPECT_EQ(rule.observe(4, 4, slow0).size(), 1u);
  EXPECT_TRUE(rule.observe(5, 5, even).empty());
  EXPECT_TRUE(rule.observe(6, 6, slow0).empty());  // a new episode counts from 1 again
  const std::vector<StragglerEpisode> again = rule.observe(7, 7, slow0);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].first_step, 6);
}

TEST(StragglerRule, AtTheThresholdOrWithNothingTimedIsNotSlow) {
  StragglerRule rule(2, 0.5, 1);
  EXPECT_TRUE(rule.observe(1, 1, {10, 15}).empty());  // two ranks: the median (12.5) moves with the slow one
  EXPECT_TRUE(rule.observe(2, 2, {0, 0}).empty());
  StragglerRule three(3, 0.5, 1);
  EXPECT_TRUE(three.observe(1, 1, {10, 10, 15}).empty());  // exactly 1.5 x the median: not above
  EXPECT_EQ(three.observe(2, 2, {10, 10, 15.01}).size(), 1u);
}

TEST(StragglerRule, EveryPersistentlySlowRankIsNamed) {
  StragglerRule rule(5, 0.15, 2);
  const std::vector<double> two_slow{10, 13, 10, 10, 14};
  EXPECT_TRUE(rule.observe(1, 10, two_slow).empty());
  const std::vector<StragglerEpisode> due = rule.observe(11, 20, two_slow);
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].rank, 1);
  EXPECT_EQ(due[1].rank, 4);
}

// A pipeline's stages do different work (the last runs the head and the loss): a rank is compared with
// the ranks of its own stage only, so a stage that is slower as a whole flags no rank, and a slow rank
// inside a stage is still found.
TEST(StragglerPipeline, RanksAreComparedWithinTheirStage) {
  EXPECT_EQ(stage_groups(8, 2), (PeerGroups{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_TRUE(stage_groups(4, 1).empty());
  const PeerGroups stages = stage_groups(4, 2);  // stage 0: ranks 0-1, stage 1 (head and loss): ranks 2-3
  const std::vector<double> head_heavy{10, 10.5, 25, 25.5};
  StragglerRule rule(4, 0.15, 1, stages);
  EXPECT_TRUE(rule.observe(1, 1, head_heavy).empty());
  StragglerRule whole_world(4, 0.15, 1);  // what comparing every rank with every rank would say
  EXPECT_EQ(whole_world.observe(1, 1, head_heavy).size(), 2u);
  const WindowSummary even = summarize({head_heavy, {1, 1, 1, 1}}, stages);
  EXPECT_NEAR(even.slowest_compute_ms / even.median_compute_ms, 1.02, 0.01);  // no rank lags its stage
  const std::vector<double> slow_in_stage{10, 10.5, 25, 50};
  const std::vector<StragglerEpisode> due = rule.observe(2, 2, slow_in_stage);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].rank, 3);
  const WindowSummary s = summarize({slow_in_stage, {5, 4, 3, 2}}, stages);
  EXPECT_EQ(s.slowest_rank, 3);
  EXPECT_DOUBLE_EQ(s.median_compute_ms, 37.5);  // its stage's median
  EXPECT_DOUBLE_EQ(s.median_wait_ms, 2.5);
}

TEST(StragglerPipeline, AStageOfOneRankHasNoPeersAndNoVerdict) {
  const PeerGroups stages = stage_groups(2, 2);
  StragglerRule rule(2, 0.15, 1, stages);
  EXPECT_TRUE(rule.observe(1, 1, {10, 40}).empty());
  const WindowSummary s = summarize({{10, 40}, {3, 1}}, stages);
  EXPECT_DOUBLE_EQ(s.slowest_compute_ms, s.median_compute_ms);  // no one to lag behind
  EXPECT_DOUBLE_EQ(s.slowest_wait_ms, s.median_wait_ms);
}

TEST(StragglerMessage, NamesRankHostPercentAndSteps) {
  const std::string msg = straggler_message({5, 3, 100, 300, 0.23}, "n03");
  EXPECT_NE(msg.find("rank 5 on host n03 computed 23% slower than the median for 3 logged windows (steps 100-300)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--preflight"), std::string::npos);
}

}  // namespace
}  // namespace zt::health
