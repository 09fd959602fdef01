// What a rank's part of the model means for the whole model, whatever the grid: its tensor-parallel
// shard (model::tp_local_table), its pipeline stage (model::PipelineCut::table), or the TP shard of its
// stage (parallel.pp x parallel.tp); a LoRA run's adapters are mapped the same way (their own map, the
// blocks' adapters of the rank's stages). Checkpoints stay in the global shape (docs/INTERFACE.md): each rank
// saves its DP slice of its part as runs of the global flat buffer and reads any checkpoint (or the
// initial values) back through the same map, so any grid resumes any other's checkpoint. The runs of
// all ranks tile the global buffer once: replicated parameters (norms, biases after a row-parallel
// layer, GPT-2's position table) are saved by TP rank 0 only, the last stage's copy of a tied token
// embedding by the first stage only, and a vocabulary shard's zero row maps nowhere.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/flat_range.hpp"
#include "dist/communicator.hpp"
#include "dist/grid.hpp"
#include "dist/world.hpp"
#include "model/model.hpp"
#include "model/param_table.hpp"
#include "model/stage_split.hpp"
#include "model/tp_split.hpp"
#include "optim/zero/engine.hpp"

namespace zt::train {

// Reads global flat elements [offset, offset + count) into out.
using ReadGlobal = std::function<void(std::int64_t offset, std::int64_t count, float* out)>;
// The reader of a whole flat buffer in memory.
ReadGlobal read_flat(const float* flat);

struct ShardMap {
  const model::ParamTable& global;
  const model::ParamTable& local;  // this rank's part_table(global, cut, grid.pp_rank(), grid.tp)
  dist::Grid grid;
  model::PipelineCut cut;  // default: no pipeline
  bool adapters = false;   // global is a LoRA adapter table (lora.hpp): blocks only, no tied copy
  std::vector<FlatRange> engine_units;  // the ZeRO engine's units over local (optim::EngineUnits); empty: local's

  // local holds the last stage's copy of the token embedding (stage_split.hpp)
  bool tied_copy() const { return !adapters && cut.holds_tied_head_copy(global.shape(), grid.pp_rank()); }
  // The table of pipeline rank s's part (its TP shard at tp > 1): what `local` is on that rank.
  model::ParamTable part_of(int pp_rank) const;

  // The runs (engine offset in the local table -> global flat offset) this rank checkpoints: its slice of
  // the ZeRO partition of the local table over grid.dp, as the tiling above leaves them.
  std::vector<model::TpRun> saved_runs() const;
  // The runs the part of pipeline rank s and TP rank r (`part`: part_of(s)) saves of its local elements
  // [offset, offset + numel), in local order: what that rank contributes to the global model.
  std::vector<model::TpRun> part_saved_runs(const model::ParamTable& part, int s, int r, std::int64_t offset,
                                            std::int64_t numel) const;
  // Local flat elements [offset, offset + count) read from global state (the tied copy too); zero rows 0.
  void read_local(std::int64_t offset, std::int64_t count, float* out, const ReadGlobal& read) const;
  // Collective over the world: rank 0 gets the global flat parameters (global.numel()) from DP rank 0 of
  // every stage and TP rank, each passing its whole local parameters; the others pass {}.
  void gather_on_root(const dist::World& world, const std::vector<float>& local_full, float* global_full) const;
  // The local flat ranges of the replicated parameters at tp > 1 (each TP rank holds the same values and
  // gradients), and of the tied copy (the first stage holds the same): each counted once in the norm.
  std::vector<FlatRange> replicated_ranges() const;
  std::vector<FlatRange> tied_copy_ranges() const;
};

// The engine's reader of a rank's local flat elements from `global`: through map's runs when the rank
// holds a part (ShardMap::read_local), `global` itself when it holds the whole (map null).
ReadGlobal local_reader(const ShardMap* map, ReadGlobal global);

// The gradient L2 norm over the whole grid from the engine's (engine_norm: finish_gradients() over the
// DP group of this rank's part): the duplicate ranges (the tied copy) left out, the shards of split
// parameters summed over the TP group with the replicated ones counted once, then the stages summed over
// the pipeline group. A null group: degree 1. Collective over the TP, then the pipeline group. An fp16
// overflow (inf or NaN) in any rank's part gives every rank a non-finite norm.
double grid_grad_norm(double engine_norm, optim::ZeroEngine& engine, dist::Communicator* tp_group,
                      const std::vector<FlatRange>& replicated, dist::Communicator* pp_group = nullptr,
                      const std::vector<FlatRange>& duplicate = {});

}  // namespace zt::train
