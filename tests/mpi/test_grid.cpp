// The process grid: TP groups are consecutive ranks, DP groups stride across them; a TP group across
// hosts is refused naming its ranks and hosts; Communicator::split builds both groups, and a collective
// on each reaches exactly its members (checked for every degree dividing the world, 1, 2 and 4 ranks).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "dist/communicator.hpp"
#include "dist/grid.hpp"
#include "tests/mpi/mpi_test_world.hpp"

namespace zt::dist {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Grid, TensorGroupsAreConsecutiveAndDataGroupsStride) {
  // world 8, tp 2: rank 5 is TP rank 1 of group 2; its DP peers are 1, 3, 5, 7.
  const Grid g = Grid::make(8, 2, 5);
  EXPECT_EQ(g.dp, 4);
  EXPECT_EQ(g.tp_rank(), 1);
  EXPECT_EQ(g.dp_rank(), 2);
  for (int r = 0; r < 8; ++r) {
    const Grid h = Grid::make(8, 2, r);
    EXPECT_EQ(h.rank_of(h.dp_rank(), h.tp_rank()), r);
  }
  EXPECT_EQ(Grid::make(3, 1, 2).dp_rank(), 2);  // tp = 1: today's pure data parallelism
  EXPECT_EQ(Grid::make(4, 4, 3).tp_rank(), 3);  // dp = 1: one TP group
}

TEST(Grid, DegreeThatDoesNotDivideTheWorldNamesTheValidOnes) {
  const std::string msg = error_of([] { Grid::make(6, 4, 0); });
  EXPECT_NE(msg.find("parallel.tp=4 does not divide the world of 6 rank(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("{1, 2, 3, 6}"), std::string::npos) << msg;
}

TEST(Grid, TensorGroupAcrossHostsIsRefusedNamingRanksAndHosts) {
  const Grid g = Grid::make(4, 2, 0);
  EXPECT_EQ(tp_groups_off_node(g, {"a", "a", "b", "b"}), "");
  // --map-by node: ranks alternate hosts, so group 0 = {0 on a, 1 on b}.
  const std::string msg = tp_groups_off_node(g, {"a", "b", "a", "b"});
  EXPECT_NE(msg.find("tensor-parallel group 0 (ranks 0-1) spans hosts: rank 0 is on a, rank 1 on b"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("lower parallel.tp"), std::string::npos) << msg;
  EXPECT_EQ(tp_groups_off_node(Grid::make(4, 1, 0), {"a", "b", "c", "d"}), "");  // tp = 1 never spans
}

TEST(Grid, RanksOfOneHostPassTheNodeCheck) {
  const auto& w = test::world();
  EXPECT_NO_THROW(check_tp_groups_share_nodes(Grid::make(w.size(), w.size(), w.rank()), w));
}

// For every tp dividing the world: each group's size and ranks, and a sum over each reaching its members only.
TEST(Grid, SplitGivesEachRankItsTensorAndDataGroups) {
  const auto& w = test::world();
  auto world_comm = make_mpi_communicator(w, 60);
  for (int tp = 1; tp <= w.size(); ++tp) {
    if (w.size() % tp != 0) continue;
    const Grid g = Grid::make(w.size(), tp, w.rank());
    world_comm->set_context(cat("tp=", tp));
    GridComms c = split_grid(*world_comm, g);
    ASSERT_EQ(c.tp->size(), tp);
    ASSERT_EQ(c.tp->rank(), g.tp_rank());
    ASSERT_EQ(c.dp->size(), g.dp);
    ASSERT_EQ(c.dp->rank(), g.dp_rank());
    EXPECT_EQ(c.tp->context(), cat("tp=", tp));  // the child inherits the watchdog's context
    std::vector<std::int32_t> x{w.rank()};
    c.tp->all_reduce(span_of(x.data(), 1), ReduceOp::kSum)->wait();
    const int first = g.rank_of(g.dp_rank(), 0);
    EXPECT_EQ(x[0], tp * first + tp * (tp - 1) / 2) << "tp=" << tp;
    std::vector<std::int32_t> ranks(g.dp, -1);
    std::int32_t mine = w.rank();
    c.dp->all_gather(span_of(&mine, 1), span_of(ranks.data(), ranks.size()))->wait();
    for (int d = 0; d < g.dp; ++d) EXPECT_EQ(ranks[d], g.rank_of(d, g.tp_rank())) << "tp=" << tp;
  }
}

// pp x dp x tp with tp innermost and pp outermost; the pipeline group holds one rank of each stage,
// in stage order; the embedding group the first and last stage of the pipeline.
TEST(Grid, PipelineStagesAreOutermost) {
  const Grid g = Grid::make(8, 2, 5, 2);  // stages {0-3} {4-7}; dp 2
  EXPECT_EQ(g.dp, 2);
  EXPECT_EQ(g.pp_rank(), 1);
  EXPECT_EQ(g.dp_rank(), 0);
  EXPECT_EQ(g.tp_rank(), 1);
  EXPECT_EQ(g.rank_of(0, 1, 1), 5);
  for (int r = 0; r < 8; ++r) {
    const Grid h = Grid::make(8, 2, r, 2);
    EXPECT_EQ(h.rank_of(h.dp_rank(), h.tp_rank(), h.pp_rank()), r);
  }
  const std::string msg = error_of([] { Grid::make(6, 1, 0, 4); });
  EXPECT_NE(msg.find("parallel.pp=4 x parallel.tp=1 = 4 does not divide the world of 6"), std::string::npos) << msg;
}

TEST(Grid, SplitGivesEachRankItsPipeline) {
  const auto& w = test::world();
  auto world_comm = make_mpi_communicator(w, 60);
  for (int pp = 2; pp <= w.size(); ++pp) {
    if (w.size() % pp != 0) continue;
    const Grid g = Grid::make(w.size(), 1, w.rank(), pp);
    GridComms c = split_grid(*world_comm, g);
    ASSERT_EQ(c.pp->size(), pp);
    ASSERT_EQ(c.pp->rank(), g.pp_rank());
    ASSERT_EQ(c.dp->size(), g.dp);
    std::vector<std::int32_t> ranks(pp, -1);
    std::int32_t mine = w.rank();
    c.pp->all_gather(span_of(&mine, 1), span_of(ranks.data(), ranks.size()))->wait();
    for (int s = 0; s < pp; ++s) EXPECT_EQ(ranks[s], g.rank_of(g.dp_rank(), 0, s)) << "pp=" << pp;
    const bool ends = g.pp_rank() == 0 || g.pp_rank() == pp - 1;
    ASSERT_EQ(c.embedding->size(), ends ? 2 : 1) << "pp=" << pp;
    std::int32_t sum = w.rank();
    c.embedding->all_reduce(span_of(&sum, 1), ReduceOp::kSum)->wait();
    if (ends) {
      EXPECT_EQ(sum, g.rank_of(g.dp_rank(), 0, 0) + g.rank_of(g.dp_rank(), 0, pp - 1));
    }
  }
}

TEST(Grid, SplitRejectsANegativeColor) {
  auto comm = make_mpi_communicator(test::world(), 60);
  EXPECT_THROW(comm->split(-1, 0), CommError);
}

}  // namespace
}  // namespace zt::dist
