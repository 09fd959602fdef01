// parallel.tp > 1 in the trainer: what a rank's shard of the model (model::tp_local_table, the table its
// tensor-parallel model and ZeRO engine see) means for the whole model. Checkpoints stay in the global
// shape whatever the grid (docs/INTERFACE.md): each rank saves its DP slice of its shard as runs of the
// global flat buffer (the replicated parameters from TP rank 0 only, so the ranks' runs tile the global
// buffer once, as a tp=1 run's do), and reads any checkpoint back through the same map. The gradient
// norm counts every split parameter's shards and every replicated parameter once over the grid.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "config/config.hpp"
#include "core/flat_range.hpp"
#include "dist/communicator.hpp"
#include "dist/grid.hpp"
#include "dist/world.hpp"
#include "model/param_table.hpp"
#include "model/tp_split.hpp"
#include "optim/zero/engine.hpp"

namespace zt::train {

// Reads global flat elements [offset, offset + count) into out.
using ReadGlobal = std::function<void(std::int64_t offset, std::int64_t count, float* out)>;

struct TpShards {
  const model::ParamTable& global;
  const model::ParamTable& local;  // tp_local_table(global, grid.tp)
  dist::Grid grid;

  // The runs (engine offset in the local table -> global flat offset) this rank checkpoints: its slice of
  // the DP partition of the local table (what checkpoint_ranges gives at tp=1), replicated parameters
  // on TP rank 0 only, zero rows nowhere.
  std::vector<model::TpRun> saved_runs() const;
  // Local flat elements [offset, offset + count) read from global state; the zero rows are 0.
  void read_local(std::int64_t offset, std::int64_t count, float* out, const ReadGlobal& read) const;
  // Collective over the world: rank 0 gets the global flat parameters (global.numel()) from the TP ranks
  // of DP slice 0 (world ranks 0..tp-1), each passing its whole local parameters; the others pass {}.
  void gather_on_root(const dist::World& world, const std::vector<float>& local_full, float* global_full) const;
  // The local flat ranges of the replicated parameters (each TP rank holds the same values and gradients).
  std::vector<FlatRange> replicated_ranges() const;
};

// The runs this rank checkpoints of a part of the model (a TP shard, a pipeline stage): its DP slice of
// `local` (the ZeRO partition over grid.dp, as checkpoint_ranges gives at tp=1), each owned range
// mapped to the global buffer by runs_of(offset, numel).
std::vector<model::TpRun> owned_global_runs(
    const model::ParamTable& local, const dist::Grid& grid,
    const std::function<std::vector<model::TpRun>(std::int64_t offset, std::int64_t numel)>& runs_of);

// The gradient L2 norm over the whole grid from the engine's (engine_norm: finish_gradients() over the
// DP group of this TP rank's shard): the shards of split parameters summed over the TP group, the
// replicated parameters counted once. Collective over the TP group (and the engine's DP group).
double grid_grad_norm(double engine_norm, optim::ZeroEngine& engine, dist::Communicator& tp_group,
                      const std::vector<FlatRange>& replicated);

}  // namespace zt::train
