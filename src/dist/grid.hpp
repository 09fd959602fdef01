// The process grid: world = tp x dp ranks. A tensor-parallel (TP) group is a run of tp consecutive
// ranks, since its ranks exchange activations in every layer and must share a node's fast links; the
// data-parallel (DP) groups stride across them (rank r's DP peers are the ranks with r's TP rank).
//
//   world 8, tp 2:  TP groups {0,1} {2,3} {4,5} {6,7};  DP groups {0,2,4,6} {1,3,5,7}
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

  // Throws ConfigError when tp does not divide world (naming the degrees that do).
  static Grid make(int world, int tp, int rank);

  int tp_rank() const { return rank % tp; }  // which shard of each layer this rank holds
  int dp_rank() const { return rank / tp; }  // which slice of the batch this rank's TP group reads
  int rank_of(int dp_rank, int tp_rank) const { return dp_rank * tp + tp_rank; }
  bool operator==(const Grid&) const = default;
};

// "" when every TP group's ranks share a host, else what is wrong, naming the ranks, their hosts and
// the fix. hosts[r] is rank r's host name.
std::string tp_groups_off_node(const Grid& grid, const std::vector<std::string>& hosts);
// The same over the running world (rank 0 collects the host names): throws ConfigError on every rank.
void check_tp_groups_share_nodes(const Grid& grid, const World& world);

// This rank's TP and DP groups, split from a communicator over the whole grid (collective over it).
struct GridComms {
  std::unique_ptr<Communicator> tp, dp;
};
GridComms split_grid(Communicator& world_comm, const Grid& grid);

}  // namespace zt::dist
