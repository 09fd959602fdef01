// The process grid: world = pp x dp x tp ranks. A tensor-parallel (TP) group is a run of tp consecutive
// ranks, since its ranks exchange activations in every layer and must share a node's fast links; the
// data-parallel (DP) groups stride across them (rank r's DP peers are the ranks with r's TP rank and
// pipeline stage); pipeline stages are outermost (Megatron's order): a stage is a block of dp x tp
// ranks, so stages can span nodes, where only one activation per micro-batch crosses between them.
// A pipeline (PP group) is the pp ranks with the same DP and TP index, one per stage.
//
//   world 8, tp 2:        TP groups {0,1} {2,3} {4,5} {6,7};  DP groups {0,2,4,6} {1,3,5,7}
//   world 8, pp 2, tp 2:  stage 0 = ranks 0-3, stage 1 = 4-7;  DP {0,2} {1,3} {4,6} {5,7};
//                         pipelines {0,4} {1,5} {2,6} {3,7}
//
// A plain value every layer reads (the model's shards from tp_rank, the batch slice from dp_rank).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.hpp"

namespace zt::dist {

class World;

struct Grid {
  int world = 1, tp = 1, dp = 1;
  int rank = 0;
  int pp = 1;

  // Throws ConfigError when tp x pp does not divide world (naming every factor and the degrees that do).
  static Grid make(int world, int tp, int rank, int pp = 1);

  int tp_rank() const { return rank % tp; }         // which shard of each layer this rank holds
  int dp_rank() const { return rank / tp % dp; }    // which slice of the batch this rank's TP group reads
  int pp_rank() const { return rank / (tp * dp); }  // which pipeline stage (which blocks) this rank runs
  int rank_of(int dp_rank, int tp_rank, int pp_rank = 0) const { return (pp_rank * dp + dp_rank) * tp + tp_rank; }
  bool operator==(const Grid&) const = default;
};

// "" when every TP group's ranks share a host, else what is wrong, naming the ranks, their hosts and
// the fix. hosts[r] is rank r's host name.
std::string tp_groups_off_node(const Grid& grid, const std::vector<std::string>& hosts);
// The same over the running world (rank 0 collects the host names): throws ConfigError on every rank.
void check_tp_groups_share_nodes(const Grid& grid, const World& world);

// This rank's TP, DP and pipeline groups, split from a communicator over the whole grid (collective over
// it). embedding (pp > 1 only): the first and last stage of this rank's pipeline, which both hold a tied
// token embedding (Megatron's embedding group); ranks of the middle stages get a group of their own.
struct GridComms {
  std::unique_ptr<Communicator> tp, dp, pp, embedding;
};
GridComms split_grid(Communicator& world_comm, const Grid& grid);

}  // namespace zt::dist
