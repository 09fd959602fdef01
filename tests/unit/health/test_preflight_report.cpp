// The preflight verdict from given measurements (nothing timed): which ranks, links and nodes are
// flagged against preflight.min_fraction of the median, nccl-tests' busbw factors, and the node-pair
// schedule that measures every pair once in disjoint rounds.
#include <gtest/gtest.h>

#include <set>

#include "core/error.hpp"
#include "dist/pair_exchange.hpp"
#include "health/preflight_report.hpp"

namespace zt::health {
namespace {

PreflightResults four_ranks(double rank2_flops) {
  PreflightResults r;
  r.n_ranks = 4, r.n_nodes = 4, r.iters = 5, r.gemm_what = "fp32 GEMM n=256", r.comm = "mpi";
  for (int i = 0; i < 4; ++i)
    r.gemm.push_back({i, "h", cat("n", i), "cpu", i == 2 ? rank2_flops : 100e9 + i * 1e9});
  return r;
}

void add_pairs(PreflightResults& r, const std::string& slow_node, double slow_seconds) {
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) {
      const bool slow = cat("n", a) == slow_node || cat("n", b) == slow_node;
      r.pairs.push_back({cat("n", a), cat("n", b), 1 << 20, slow ? slow_seconds : 1e-3, 0});
    }
}

TEST(PreflightVerdict, NothingFlaggedWhenAllAreNearTheMedian) {
  PreflightResults r = four_ranks(99e9);
  add_pairs(r, "", 0);
  const Verdict v = judge(r, 0.8);
  EXPECT_TRUE(v.ok());
  EXPECT_TRUE(v.bad_nodes.empty());
  EXPECT_NE(format_table(r, v, 0.8).find("preflight: OK, nothing flagged"), std::string::npos);
  EXPECT_NE(to_json(r, v, 0.8).find("\"ok\": true"), std::string::npos);
}

TEST(PreflightVerdict, SlowGemmRankIsNamedWithItsHostAndNode) {
  const PreflightResults r = four_ranks(10e9);
  const Verdict v = judge(r, 0.8);
  ASSERT_EQ(v.slow_ranks, std::vector<int>{2});
  EXPECT_EQ(v.bad_nodes, std::vector<std::string>{"n2"});
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_NE(v.reasons[0].find("rank 2 (host h, cpu)"), std::string::npos) << v.reasons[0];
  EXPECT_NE(to_json(r, v, 0.8).find("\"flagged_ranks\": [2], \"flagged_nodes\": [\"n2\"]"), std::string::npos);
}

TEST(PreflightVerdict, ANodeWithMostLinksSlowIsBlamedNotItsPeers) {
  PreflightResults r = four_ranks(100e9);
  add_pairs(r, "n3", 10e-3);  // n3's three links at a tenth of the others' bandwidth
  const Verdict v = judge(r, 0.8);
  EXPECT_EQ(v.slow_links.size(), 3u);
  EXPECT_EQ(v.bad_nodes, std::vector<std::string>{"n3"});  // n0-n2 have 1 slow link of 3 each
  EXPECT_FALSE(v.ok());
}

TEST(PreflightVerdict, OneSlowLinkIsFlaggedButBlamesNeitherEnd) {
  PreflightResults r = four_ranks(100e9);
  add_pairs(r, "", 0);
  r.pairs[0].seconds = 10e-3;  // n0 <-> n1 only: a cable or switch port
  const Verdict v = judge(r, 0.8);
  EXPECT_EQ(v.slow_links, std::vector<std::string>{"n0 <-> n1"});
  EXPECT_TRUE(v.bad_nodes.empty());
  EXPECT_FALSE(v.ok());
  EXPECT_NE(format_table(r, v, 0.8).find("preflight: nodes to exclude: none identified"), std::string::npos);
}

TEST(PreflightVerdict, TwoNodesHaveNoMedianToFallBelow) {
  PreflightResults r = four_ranks(100e9);
  r.pairs.push_back({"a", "b", 1 << 20, 1.0, 0});
  EXPECT_TRUE(judge(r, 0.8).ok());
}

TEST(PreflightVerdict, WrongValuesFailTheCheck) {
  PreflightResults r = four_ranks(100e9);
  r.collectives.push_back({"all_reduce", 1 << 20, 1e-3, 7});
  const Verdict v = judge(r, 0.8);
  EXPECT_TRUE(v.wrong_results);
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_NE(v.reasons[0].find("7 wrong values"), std::string::npos);
}

TEST(PreflightVerdict, BusBandwidthUsesTheNcclTestsFactors) {
  const CollectiveRow ar{"all_reduce", 1000000, 1e-3, 0}, ag{"all_gather", 1000000, 1e-3, 0},
      rs{"reduce_scatter", 1000000, 1e-3, 0};
  EXPECT_DOUBLE_EQ(ar.algbw(), 1e9);
  EXPECT_DOUBLE_EQ(ar.busbw(4), 1e9 * 2 * 3 / 4);
  EXPECT_DOUBLE_EQ(ag.busbw(4), 1e9 * 3 / 4);
  EXPECT_DOUBLE_EQ(rs.busbw(4), 1e9 * 3 / 4);
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
}

TEST(PairSchedule, EveryPairMeetsOnceInDisjointRounds) {
  for (int n : {0, 1, 2, 3, 4, 5, 8, 9}) {
    std::set<std::pair<int, int>> met;
    for (int round = 0; round < dist::pair_rounds(n); ++round)
      for (int x = 0; x < n; ++x) {
        const int p = dist::pair_partner(n, round, x);
        if (p < 0) continue;
        ASSERT_NE(p, x) << "n=" << n;
        ASSERT_EQ(dist::pair_partner(n, round, p), x) << "n=" << n << " round " << round;  // disjoint: partners agree
        met.insert({std::min(x, p), std::max(x, p)});
      }
    EXPECT_EQ(met.size(), static_cast<std::size_t>(n * (n - 1) / 2)) << "n=" << n;
  }
}

}  // namespace
}  // namespace zt::health
