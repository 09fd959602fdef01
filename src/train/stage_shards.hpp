// parallel.pp > 1 in the trainer: what a stage's parameter table (model/stage_split.hpp) means for the
// whole model, so checkpoints stay in the global shape (as tp_shards.hpp does for a TP shard): each
// rank saves its DP slice of its stage's table as runs of the global flat buffer (the tied head's copy
// of the token embedding on the last stage is saved by the first stage only, so the ranks' runs tile
// the global buffer once), and reads any checkpoint (or the initial values) back through the same map.
// A pp=2 checkpoint resumes on pp=1 and the other way round.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/grid.hpp"
#include "dist/world.hpp"
#include "model/param_table.hpp"
#include "model/stage_split.hpp"
#include "model/tp_split.hpp"
#include "train/tp_shards.hpp"

namespace zt::train {

struct StageShards {
  const model::ParamTable& global;
  const model::ParamTable& local;  // this rank's table: cut.table(global, grid.pp_rank())
  dist::Grid grid;
  model::PipelineCut cut;

  // local holds the last stage's copy of the token embedding
  bool tied_copy() const { return cut.holds_tied_head_copy(global.shape(), grid.pp_rank()); }

  // The runs (engine offset in the local table -> global flat offset) this rank checkpoints.
  std::vector<model::TpRun> saved_runs() const;
  // Local flat elements [offset, offset + count) read from global state.
  void read_local(std::int64_t offset, std::int64_t count, float* out, const ReadGlobal& read) const;
  // Collective over the world: rank 0 gets the global flat parameters from DP rank 0 of every stage,
  // each passing its whole local parameters (the others pass {}).
  void gather_on_root(const dist::World& world, const std::vector<float>& local_full, float* global_full) const;
};

// The runs of local flat elements [offset, offset + numel) in the global buffer, parameter by
// parameter; with_tied_copy false: the tied copy maps nowhere.
std::vector<model::TpRun> stage_global_runs(const model::ParamTable& global, const model::ParamTable& local,
                                            std::int64_t offset, std::int64_t numel, bool tied_copy, bool with_tied_copy);

}  // namespace zt::train
