// model.h5's values a unit at a time (model_gather.hpp).
#include "train/model_gather.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace zt::train {

const float* UnitGather::view(std::int64_t offset, std::int64_t count) {
  // Units are fetched once each, in order: a request before the unit held would read values long gone.
  ZT_CHECK(held_.numel == 0 || offset >= held_.offset, "model gather: elements ", offset, " asked for after unit [",
           held_.offset, ", ", held_.end(), ") (requests must come in flat order)");
  while (held_.end() <= offset) next();
  if (!keep_) {  // joined only: the units up to the range's end fetched and dropped
    while (held_.end() < offset + count) next();
    return nullptr;
  }
  if (offset >= held_.offset && offset + count <= held_.end()) return values_.data() + (offset - held_.offset);
  assembled_.assign(static_cast<std::size_t>(count), 0.f);  // across units (elements no unit holds: 0)
  for (std::int64_t at = offset; at < offset + count;) {
    while (held_.end() <= at) next();
    if (at < held_.offset) {
      at = std::min(offset + count, held_.offset);
      continue;
    }
    const std::int64_t n = std::min(offset + count, held_.end()) - at;
    std::copy_n(values_.begin() + (at - held_.offset), n, assembled_.begin() + (at - offset));
    at += n;
  }
  return assembled_.data();
}

void UnitGather::finish() {
  keep_ = false;
  values_ = {}, assembled_ = {};
  while (next_ < source_.n_units()) next();
}

void UnitGather::next() {
  const int u = next_++;
  ZT_CHECK_LT(u, source_.n_units(), "model gather: elements asked for past the last unit");
  const FlatRange unit = source_.unit(u);
  ZT_CHECK_GE(unit.offset, held_.end(), "model gather: the units are not in flat order");
  if (keep_) values_.resize(static_cast<std::size_t>(unit.numel));
  source_.fetch(u, keep_ ? values_.data() : nullptr);
  held_ = unit;
}

PartsSource::PartsSource(const dist::World& world, optim::ZeroEngine& engine, const ShardMap& shards)
    : world_(world), shards_(shards), engine_source_(engine) {
  const bool sends = shards.grid.dp_rank() == 0;
  if (sends || engine.gather_is_collective()) local_.emplace(engine_source_, sends);
  if (world.is_root())
    for (int s = 0; s < shards.grid.pp; ++s) parts_.push_back(shards.part_of(s));
}

FlatRange PartsSource::unit(int u) const {
  const model::Unit& g = shards_.global.units().at(static_cast<std::size_t>(u));
  return {static_cast<std::int64_t>(g.offset), static_cast<std::int64_t>(g.numel)};
}

// A part's table keeps the model's unit numbers (stage_split.hpp; a stage without unit u holds it empty).
std::vector<model::TpRun> PartsSource::runs_of(int u, int s, int r) const {
  const model::ParamTable& table = world_.is_root() ? parts_.at(static_cast<std::size_t>(s)) : shards_.local;
  if (u >= table.n_units()) return {};
  const model::Unit& mine = table.units()[static_cast<std::size_t>(u)];
  return shards_.part_saved_runs(table, s, r, static_cast<std::int64_t>(mine.offset), static_cast<std::int64_t>(mine.numel));
}

// Each part sends the span of its local elements that its runs of unit u cover, straight from its
// engine's unit (no copy; the few elements inside it that it does not save, a replicated parameter on TP
// rank > 0, travel unused), and rank 0 places each run from the span.
void PartsSource::fetch(int u, float* out) {
  const dist::Grid& grid = shards_.grid;
  const std::vector<model::TpRun> runs = runs_of(u, grid.pp_rank(), grid.tp_rank());
  std::string_view mine;  // DP rank 0's span; the others send nothing
  if (local_ && !runs.empty()) {
    const std::int64_t lo = runs.front().local_offset, hi = runs.back().local_offset + runs.back().numel;
    const float* values = local_->view(lo, hi - lo);
    if (values) mine = {reinterpret_cast<const char*>(values), static_cast<std::size_t>(hi - lo) * sizeof(float)};
  }
  const FlatRange whole = unit(u);
  if (out) std::fill(out, out + whole.numel, 0.f);  // elements no part saves (none today) stay 0
  world_.gather_to_root_each(mine,
                             cat("gathering unit ", u, " of the model from its parts (TP shards, pipeline stages) for model.h5"),
                             [&](int rank, std::string_view bytes) {
    dist::Grid from = grid;
    from.rank = rank;
    if (from.dp_rank() != 0 || !out) return;
    const int s = from.pp_rank(), r = from.tp_rank();
    const std::vector<model::TpRun> theirs = rank == 0 ? runs : runs_of(u, s, r);
    if (theirs.empty()) return;
    const float* span = reinterpret_cast<const float*>(bytes.data());
    const std::int64_t lo = theirs.front().local_offset, n = static_cast<std::int64_t>(bytes.size() / sizeof(float));
    ZT_CHECK_EQ(n, theirs.back().local_offset + theirs.back().numel - lo, "checkpoint: pipeline stage ", s, ", TP rank ", r,
                "'s elements of unit ", u);
    for (const model::TpRun& run : theirs) {
      ZT_CHECK(run.global_offset >= whole.offset && run.global_offset + run.numel <= whole.end() && run.local_offset >= lo &&
                   run.local_offset + run.numel <= lo + n,
               "checkpoint: pipeline stage ", s, ", TP rank ", r, "'s run of unit ", u, " falls outside it");
      std::copy_n(span + (run.local_offset - lo), run.numel, out + (run.global_offset - whole.offset));
    }
  });
}

}  // namespace zt::train
