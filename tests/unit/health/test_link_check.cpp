// The slow-link check's schedule, times and rule (health/link_check.hpp), as pure functions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "health/link_check.hpp"

namespace zt::health {
namespace {

TEST(LinkSchedule, EveryRingEdgeMeetsOnceInDisjointRounds) {
  for (int n = 3; n <= 9; ++n) {
    std::set<std::pair<int, int>> met;
    for (int round = 0; round < link_rounds(n); ++round) {
      std::set<int> busy;
      for (int x = 0; x < n; ++x) {
        const int p = link_partner(n, round, x);
        if (p < 0) continue;
        EXPECT_EQ(link_partner(n, round, p), x) << "n=" << n << " round " << round << " node " << x;
        EXPECT_TRUE(p == (x + 1) % n || p == (x + n - 1) % n) << "not a neighbour";
        EXPECT_TRUE(busy.insert(x).second) << "node " << x << " twice in round " << round;
        if (x < p) {
          EXPECT_TRUE(met.insert({x, p}).second) << "edge met twice";
        }
      }
    }
    EXPECT_EQ(met.size(), static_cast<std::size_t>(n)) << "n=" << n << ": every edge of the ring";
  }
  EXPECT_EQ(link_rounds(2), 0);  // 1-2 nodes: nothing runs
  EXPECT_EQ(link_partner(2, 0, 0), -1);
  EXPECT_EQ(link_rounds(4), 2);
  EXPECT_EQ(link_rounds(5), 3);
}

// Node 2 of 4 behind a slow link: its two edges are slow, its neighbours keep one fast edge each, so
// only node 2 stands out and the median is a fast node's.
TEST(LinkTimes, OnlyTheNodeWhoseBothLinksAreSlowStandsOut) {
  const std::vector<double> prev{0.2, 0.3, 101, 99};  // prev[x]: node x with node x-1
  const std::vector<double> next{0.3, 102, 100, 0.2};  // next[x]: node x with node x+1
  const LinkTimes t = link_times(prev, next);
  ASSERT_EQ(t.node_ms.size(), 4u);
  EXPECT_DOUBLE_EQ(t.node_ms[0], 0.2);  // edges 3-0 (0.2, 0.2) and 0-1 (0.3, 0.3)
  EXPECT_DOUBLE_EQ(t.node_ms[1], 0.3);  // edge 0-1; edge 1-2 is slow
  EXPECT_DOUBLE_EQ(t.node_ms[2], 99);   // edges 1-2 (min 101, 102) and 2-3 (min 100, 99)
  EXPECT_DOUBLE_EQ(t.node_ms[3], 0.2);
  EXPECT_DOUBLE_EQ(t.median_ms, 0.25);  // even count: the mean of the middle two
}

TEST(LinkTimes, AnEdgeIsTheLesserOfItsEndsMeasurements) {
  const LinkTimes t = link_times({5, 1, 1}, {1, 1, 5});  // node 0's own measurements of edge 2-0 and 0-1 high
  EXPECT_DOUBLE_EQ(t.node_ms[0], 1);
  EXPECT_DOUBLE_EQ(t.median_ms, 1);
}

LinkTimes times(std::vector<double> node_ms) {
  LinkTimes t;
  t.node_ms = std::move(node_ms);
  std::vector<double> sorted = t.node_ms;
  std::sort(sorted.begin(), sorted.end());
  t.median_ms = (sorted[1] + sorted[2]) / 2;  // 4 nodes
  return t;
}

TEST(LinkRule, WarnsOnceAfterTheConfiguredWindowsAndAgainAfterTheEpisodeEnds) {
  LinkRule rule(4, 0.15, 3);
  const LinkTimes slow2 = times({0.2, 0.3, 100, 0.2});
  EXPECT_TRUE(rule.observe(1, slow2).empty());
  EXPECT_TRUE(rule.observe(11, slow2).empty());
  const std::vector<LinkRule::Due> due = rule.observe(21, slow2);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].node, 2);
  EXPECT_EQ(due[0].first_step, 1);
  EXPECT_TRUE(rule.observe(31, slow2).empty());  // the same episode: said once
  EXPECT_TRUE(rule.observe(41, times({0.2, 0.3, 0.3, 0.2})).empty());  // back: the episode ends
  EXPECT_TRUE(rule.observe(51, slow2).empty());
  EXPECT_TRUE(rule.observe(61, slow2).empty());
  ASSERT_EQ(rule.observe(71, slow2).size(), 1u);
}

TEST(LinkRule, NeedsBothTheFractionAndTheFloor) {
  LinkRule rule(4, 0.15, 1);
  // 30 x the median but under kLinkSlowMs above it: a fast link's jitter, no verdict.
  EXPECT_TRUE(rule.observe(1, times({0.2, 0.2, 0.2 + kLinkSlowMs / 2, 0.2})).empty());
  // kLinkSlowMs above the median but under the fraction: a slow network, not one slow node.
  EXPECT_TRUE(rule.observe(2, times({100, 100, 100 + kLinkSlowMs, 100})).empty());
  EXPECT_EQ(rule.observe(3, times({0.2, 0.2, 0.2 + 2 * kLinkSlowMs, 0.2})).size(), 1u);
}

TEST(LinkMessage, NamesTheHostItsRanksAndTheWindow) {
  const std::string s = slow_link_message("node2", "ranks 4, 5", 3, 11, 40, 101.3, 0.25);
  EXPECT_NE(s.find("the link of node node2 (ranks 4, 5) is slow"), std::string::npos) << s;
  EXPECT_NE(s.find("for 3 logged windows (steps 11-40; now 101.3 ms against the median node's 0.25 ms)"), std::string::npos) << s;
  EXPECT_NE(s.find("Training goes on"), std::string::npos) << s;
}

}  // namespace
}  // namespace zt::health
