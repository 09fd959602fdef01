// The trainer's view of a pipeline stage's table (stage_shards.hpp).
#include "train/stage_shards.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "model/stage_split.hpp"

namespace zt::train {

std::vector<model::TpRun> stage_global_runs(const model::ParamTable& global, const model::ParamTable& local,
                                            std::int64_t offset, std::int64_t numel, bool tied_copy, bool with_tied_copy) {
  std::vector<model::TpRun> runs;
  for (std::size_t i = 0; i < local.params().size(); ++i) {
    const model::ParamInfo& p = local.params()[i];
    if (tied_copy && !with_tied_copy && i == local.first_param(0)) continue;
    const std::int64_t begin = std::max<std::int64_t>(offset, static_cast<std::int64_t>(p.offset));
    const std::int64_t end = std::min<std::int64_t>(offset + numel, static_cast<std::int64_t>(p.offset + p.numel));
    if (begin >= end) continue;
    const std::int64_t global_at = static_cast<std::int64_t>(global.find(p.name).offset) + (begin - static_cast<std::int64_t>(p.offset));
    runs.push_back({begin, global_at, end - begin});
  }
  return runs;
}

std::vector<model::TpRun> StageShards::saved_runs() const {
  return owned_global_runs(local, grid, [&](std::int64_t offset, std::int64_t numel) {
    return stage_global_runs(global, local, offset, numel, tied_copy(), false);
  });
}

void StageShards::read_local(std::int64_t offset, std::int64_t count, float* out, const ReadGlobal& read) const {
  std::fill(out, out + count, 0.f);
  for (const model::TpRun& run : stage_global_runs(global, local, offset, count, tied_copy(), true))
    read(run.global_offset, run.numel, out + (run.local_offset - offset));
}

void StageShards::gather_on_root(const dist::World& world, const std::vector<float>& local_full, float* global_full) const {
  const bool sends = grid.dp_rank() == 0 && grid.tp_rank() == 0;
  ZT_CHECK(!sends || local_full.size() == local.numel(), "pipeline checkpoint: stage ", grid.pp_rank(), "'s parameters hold ",
           local_full.size(), " of ", local.numel(), " elements");
  const std::string mine = sends ? std::string(reinterpret_cast<const char*>(local_full.data()), local_full.size() * sizeof(float))
                                 : std::string();
  const std::vector<std::string> all = world.gather_to_root(mine, "gathering the pipeline stages' parameters for model.h5");
  if (!world.is_root()) return;
  for (int s = 0; s < grid.pp; ++s) {
    const model::ParamTable table = cut.table(global, s);
    const std::string& bytes = all.at(static_cast<std::size_t>(grid.rank_of(0, 0, s)));
    ZT_CHECK_EQ(bytes.size(), table.numel() * sizeof(float), "pipeline checkpoint: stage ", s, "'s parameters");
    const float* values = reinterpret_cast<const float*>(bytes.data());
    const bool copy = cut.holds_tied_head_copy(global.shape(), s);
    for (const model::TpRun& run : stage_global_runs(global, table, 0, static_cast<std::int64_t>(table.numel()), copy, false))
      std::memcpy(global_full + run.global_offset, values + run.local_offset, static_cast<std::size_t>(run.numel) * sizeof(float));
  }
}

}  // namespace zt::train
