// A rank's part of the model as runs of the global model (shard_map.hpp).
#include "train/shard_map.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/stage_split.hpp"
#include "optim/schedule.hpp"
#include "optim/zero/model_adapters.hpp"
#include "optim/zero/partition.hpp"

namespace zt::train {

namespace {

// Where a stage table keeps its copy of the token embedding (the tied head's weight): unit 0's first.
FlatRange tied_copy_range(const model::ParamTable& local) {
  const model::ParamInfo& copy = local.params()[local.first_param(0)];
  return {static_cast<std::int64_t>(copy.offset), static_cast<std::int64_t>(copy.numel)};
}

// The runs of local flat elements [offset, offset + numel) of TP rank r's part: those it saves (the
// replicated parameters on TP rank 0 only, the tied copy nowhere) or those it reads (all but zero rows).
std::vector<model::TpRun> part_runs(const model::ParamTable& global, const model::ParamTable& local, int tp, int r,
                                    bool tied_copy, std::int64_t offset, std::int64_t numel, bool saved) {
  if (!saved) return model::tp_source_runs(global, local, tp, r, offset, numel);
  std::vector<model::TpRun> runs = model::tp_global_runs(global, local, tp, r, offset, numel);
  if (tied_copy) {  // the first stage saves the token embedding
    const FlatRange range = tied_copy_range(local);
    std::erase_if(runs, [&](const model::TpRun& r) { return intersect(range, {r.local_offset, r.numel}).numel > 0; });
  }
  return runs;
}

}  // namespace

model::ParamTable ShardMap::part_of(int pp_rank) const {
  return adapters ? model::adapter_part_table(global, cut, pp_rank, grid.tp) : model::part_table(global, cut, pp_rank, grid.tp);
}

std::vector<model::TpRun> ShardMap::saved_runs() const {
  const optim::Partition part(engine_units.empty() ? optim::units_of(local) : engine_units, {}, grid.dp, grid.dp_rank());
  std::vector<model::TpRun> runs;
  for (int u = 0; u < part.n_units(); ++u) {
    const FlatRange r = part.owned(u, grid.dp_rank());
    if (r.numel == 0) continue;
    for (const model::TpRun& run : part_runs(global, local, grid.tp, grid.tp_rank(), tied_copy(), r.offset, r.numel, true))
      runs.push_back(run);
  }
  return runs;
}

std::vector<model::TpRun> ShardMap::part_saved_runs(const model::ParamTable& part, int s, int r, std::int64_t offset,
                                                    std::int64_t numel) const {
  const bool copy = !adapters && cut.holds_tied_head_copy(global.shape(), s);
  return part_runs(global, part, grid.tp, r, copy, offset, numel, true);
}

void ShardMap::read_local(std::int64_t offset, std::int64_t count, float* out, const ReadGlobal& read) const {
  std::fill(out, out + count, 0.f);  // the zero rows, which map nowhere
  for (const model::TpRun& run : part_runs(global, local, grid.tp, grid.tp_rank(), tied_copy(), offset, count, false))
    read(run.global_offset, run.numel, out + (run.local_offset - offset));
}

void ShardMap::gather_on_root(const dist::World& world, const std::vector<float>& local_full, float* global_full) const {
  const bool sends = grid.dp_rank() == 0;
  ZT_CHECK(!sends || local_full.size() == local.numel(), "checkpoint: the parameters of pipeline stage ", grid.pp_rank(),
           ", TP rank ", grid.tp_rank(), " hold ", local_full.size(), " of ", local.numel(), " elements");
  // Each part placed as it arrives: on rank 0 its own part, one received part and the whole model at once.
  const std::size_t bytes_mine = local_full.size() * sizeof(float);
  const std::string mine = sends && !world.is_root() ? std::string(reinterpret_cast<const char*>(local_full.data()), bytes_mine)
                                                     : std::string();
  world.gather_to_root_each(mine, "gathering the model's parts (TP shards, pipeline stages) for model.h5",
                            [&](int rank, std::string_view bytes) {
    dist::Grid from = grid;
    from.rank = rank;
    if (from.dp_rank() != 0) return;
    if (rank == 0) bytes = {reinterpret_cast<const char*>(local_full.data()), bytes_mine};
    const int s = from.pp_rank(), r = from.tp_rank();
    const model::ParamTable table = part_of(s);
    ZT_CHECK_EQ(bytes.size(), table.numel() * sizeof(float), "checkpoint: pipeline stage ", s, ", TP rank ", r, "'s parameters");
    const float* values = reinterpret_cast<const float*>(bytes.data());
    for (const model::TpRun& run : part_saved_runs(table, s, r, 0, static_cast<std::int64_t>(table.numel())))
      std::copy_n(values + run.local_offset, run.numel, global_full + run.global_offset);
  });
}

std::vector<FlatRange> ShardMap::replicated_ranges() const {
  std::vector<FlatRange> out;
  if (grid.tp == 1) return out;
  for (const model::ParamInfo& p : local.params())
    if (model::tp_split_of(p, local.shape()).kind == model::TpSplit::Kind::kReplicated)
      out.push_back({static_cast<std::int64_t>(p.offset), static_cast<std::int64_t>(p.numel)});
  return out;
}

std::vector<FlatRange> ShardMap::tied_copy_ranges() const {
  if (!tied_copy()) return {};
  return {tied_copy_range(local)};
}

ReadGlobal read_flat(const float* flat) {
  return [flat](std::int64_t offset, std::int64_t count, float* out) { std::copy_n(flat + offset, count, out); };
}

ReadGlobal local_reader(const ShardMap* map, ReadGlobal global) {
  if (!map) return global;
  return [map, global = std::move(global)](std::int64_t offset, std::int64_t count, float* out) {
    map->read_local(offset, count, out, global);
  };
}

double grid_grad_norm(double engine_norm, optim::ZeroEngine& engine, dist::Communicator* tp_group,
                      const std::vector<FlatRange>& replicated, dist::Communicator* pp_group,
                      const std::vector<FlatRange>& duplicate) {
  // The same parts on every rank of a DP group: these collectives (stages 1-3) are joined by all or none.
  const double duplicate_sq = duplicate.empty() ? 0.0 : engine.grad_sum_of_squares(duplicate);
  const double replicated_sq = replicated.empty() ? 0.0 : engine.grad_sum_of_squares(replicated);
  double sq = engine_norm * engine_norm - duplicate_sq - replicated_sq;  // this rank's split shards
  if (tp_group) sq = tp_group->all_reduce_value(sq, dist::ReduceOp::kSum);
  sq += replicated_sq;  // the same on every TP rank
  if (pp_group) sq = pp_group->all_reduce_value(sq, dist::ReduceOp::kSum);
  return optim::norm_from_sum_of_squares(sq);
}

}  // namespace zt::train
