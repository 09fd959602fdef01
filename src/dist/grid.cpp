// The process grid's arithmetic, its one-node rule for TP groups, and its sub-communicators.
#include "dist/grid.hpp"

#include "core/error.hpp"
#include "dist/world.hpp"

namespace zt::dist {

Grid Grid::make(int world, int tp, int rank, int pp) {
  ZT_CHECK(world >= 1 && rank >= 0 && rank < world, "grid: rank outside the world");
  if (tp < 1 || pp < 1 || world % (tp * pp) != 0) {
    std::string valid;
    for (int d = 1; d <= world; ++d)
      if (world % d == 0) valid += cat(valid.empty() ? "" : ", ", d);
    if (pp == 1)
      throw ConfigError(cat("parallel.tp=", tp, " does not divide the world of ", world,
                            " rank(s): the world is tp x data-parallel ranks; use parallel.tp in {", valid, "}"));
    throw ConfigError(cat("parallel.pp=", pp, " x parallel.tp=", tp, " = ", tp * pp, " does not divide the world of ",
                          world, " rank(s): the world is pp x data-parallel x tp ranks; use pp x tp in {", valid, "}"));
  }
  return Grid{world, tp, world / (tp * pp), rank, pp};
}

std::string tp_groups_off_node(const Grid& grid, const std::vector<std::string>& hosts) {
  ZT_CHECK_EQ(hosts.size(), static_cast<std::size_t>(grid.world), "grid: one host name per rank");
  for (int g = 0; g < grid.dp; ++g) {
    const int first = grid.rank_of(g, 0);
    for (int t = 1; t < grid.tp; ++t) {
      const int r = grid.rank_of(g, t);
      if (hosts[r] == hosts[first]) continue;
      return cat("parallel.tp=", grid.tp, ": tensor-parallel group ", g, " (ranks ", first, "-", first + grid.tp - 1,
                 ") spans hosts: rank ", first, " is on ", hosts[first], ", rank ", r, " on ", hosts[r],
                 "; its ranks exchange activations in every layer and must share a node. Launch the same "
                 "number of ranks on every node, a multiple of ", grid.tp,
                 ", with consecutive ranks on one node (mpirun --map-by node is wrong here; "
                 "use --map-by slot or srun's block distribution), or lower parallel.tp");
    }
  }
  return "";
}

void check_tp_groups_share_nodes(const Grid& grid, const World& world) {
  const std::vector<std::string> hosts = world.gather_to_root(world.host(), "collecting host names for parallel.tp");
  const std::string problem = world.broadcast_from_root(world.is_root() ? tp_groups_off_node(grid, hosts) : "",
                                                        "checking that tensor-parallel groups share a node");
  if (!problem.empty()) throw ConfigError(problem);
}

GridComms split_grid(Communicator& world_comm, const Grid& grid) {
  ZT_CHECK(world_comm.size() == grid.world && world_comm.rank() == grid.rank, "grid: communicator is not the grid's world");
  GridComms c;
  const int pipeline = grid.dp_rank() * grid.tp + grid.tp_rank();  // which pipeline: the same in every stage
  c.tp = world_comm.split(grid.rank / grid.tp, grid.tp_rank());
  c.dp = world_comm.split(grid.pp_rank() * grid.tp + grid.tp_rank(), grid.dp_rank());
  if (grid.pp == 1) return c;
  c.pp = world_comm.split(pipeline, grid.pp_rank());
  const bool ends = grid.pp_rank() == 0 || grid.pp_rank() == grid.pp - 1;
  const int pipelines = grid.dp * grid.tp;
  c.embedding = world_comm.split(ends ? pipeline : pipelines * grid.pp_rank() + pipeline, grid.pp_rank());
  return c;
}

}  // namespace zt::dist
