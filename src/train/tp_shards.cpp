// The trainer's view of a tensor-parallel shard (tp_shards.hpp).
#include "train/tp_shards.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "optim/schedule.hpp"
#include "optim/zero/partition.hpp"
#include "train/zero_model.hpp"

namespace zt::train {

std::vector<model::TpRun> owned_global_runs(
    const model::ParamTable& local, const dist::Grid& grid,
    const std::function<std::vector<model::TpRun>(std::int64_t offset, std::int64_t numel)>& runs_of) {
  const optim::Partition part(units_of(local), params_of(local), grid.dp, grid.dp_rank());
  std::vector<model::TpRun> runs;
  for (int u = 0; u < part.n_units(); ++u) {
    const FlatRange r = part.owned(u, grid.dp_rank());
    if (r.numel == 0) continue;
    for (const model::TpRun& run : runs_of(r.offset, r.numel)) runs.push_back(run);
  }
  return runs;
}

std::vector<model::TpRun> TpShards::saved_runs() const {
  return owned_global_runs(local, grid, [&](std::int64_t offset, std::int64_t numel) {
    return model::tp_global_runs(global, local, grid.tp, grid.tp_rank(), offset, numel);
  });
}

void TpShards::read_local(std::int64_t offset, std::int64_t count, float* out, const ReadGlobal& read) const {
  std::fill(out, out + count, 0.f);  // the zero rows, which map nowhere
  for (const model::TpRun& run : model::tp_source_runs(global, local, grid.tp, grid.tp_rank(), offset, count))
    read(run.global_offset, run.numel, out + (run.local_offset - offset));
}

void TpShards::gather_on_root(const dist::World& world, const std::vector<float>& local_full, float* global_full) const {
  const bool sends = grid.dp_rank() == 0;
  ZT_CHECK(!sends || local_full.size() == local.numel(), "tp checkpoint: the local parameters of TP rank ",
           grid.tp_rank(), " hold ", local_full.size(), " of ", local.numel(), " elements");
  const std::string mine = sends ? std::string(reinterpret_cast<const char*>(local_full.data()), local_full.size() * sizeof(float))
                                 : std::string();
  const std::vector<std::string> all = world.gather_to_root(mine, "gathering the TP shards' parameters for model.h5");
  if (!world.is_root()) return;
  std::vector<float> shard(local.numel());
  for (int r = 0; r < grid.tp; ++r) {  // DP slice 0 is world ranks 0..tp-1
    const std::string& bytes = all.at(static_cast<std::size_t>(grid.rank_of(0, r)));
    ZT_CHECK_EQ(bytes.size(), shard.size() * sizeof(float), "tp checkpoint: TP rank ", r, "'s parameters");
    std::memcpy(shard.data(), bytes.data(), bytes.size());
    model::tp_place_flat(global, local, shard.data(), global_full, grid.tp, r);
  }
}

std::vector<FlatRange> TpShards::replicated_ranges() const {
  std::vector<FlatRange> out;
  for (const model::ParamInfo& p : local.params())
    if (model::tp_split_of(p, local.shape()).kind == model::TpSplit::Kind::kReplicated)
      out.push_back({static_cast<std::int64_t>(p.offset), static_cast<std::int64_t>(p.numel)});
  return out;
}

double grid_grad_norm(double engine_norm, optim::ZeroEngine& engine, dist::Communicator& tp_group,
                      const std::vector<FlatRange>& replicated) {
  const double replicated_sq = engine.grad_sum_of_squares(replicated);  // the same on every TP rank
  const double split_sq = tp_group.all_reduce_value(engine_norm * engine_norm - replicated_sq, dist::ReduceOp::kSum);
  // fp16 overflow in any rank's shard makes the sum inf or NaN on every rank of the group.
  return optim::norm_from_sum_of_squares(split_sq + replicated_sq);
}

}  // namespace zt::train
