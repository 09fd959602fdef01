// RL's KL reference (rl.kl_coef > 0 with a full actor; a LoRA actor's reference is its frozen base): the
// initial policy's weights in the compute dtype, read-only, for a forward pass over the rollouts each
// iteration. Below ZeRO-3 every rank holds its part (its TP shard) whole; at train.zero_stage=3 a frozen,
// parameter-only ZeRO-3 engine shards it over the data-parallel group as the actor's weights are and
// gathers a unit at a time in the pass (verl's reference under FSDP), so no rank holds the whole copy.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/communicator.hpp"
#include "model/device_weights.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"
#include "optim/zero/engine.hpp"
#include "optim/zero/model_adapters.hpp"
#include "train/shard_map.hpp"

namespace zt::train {

class ReferencePolicy {
 public:
  // global: the whole model's initial values by range (fp32, the global table's layout; read a block or a
  // unit at a time, never whole); local: this rank's part
  // (a TP shard, read through map; map null at tp = 1); units: the actor engine's units of `local` (the
  // vocabulary's pieces with zero.split_vocab), which the ZeRO-3 engine gathers by. Collective at ZeRO-3
  // over dp. The tables, map and units must outlive this.
  ReferencePolicy(backend::Backend& be, const config::Config& c, const model::ParamTable& local, const ShardMap* map,
                  dist::Communicator& dp, const optim::EngineUnits& units, const ReadGlobal& global);
  // The weights for the next forward pass (at ZeRO-3 with the pass's gather order set).
  model::ParamSource& params();
  bool sharded() const { return engine_ != nullptr; }

 private:
  const model::ParamTable& local_;
  const optim::EngineUnits& units_;
  std::unique_ptr<model::DeviceWeights> whole_;  // below ZeRO-3
  std::unique_ptr<optim::ZeroEngine> engine_;    // ZeRO-3
  std::unique_ptr<model::ParamSource> sharded_params_;
};

}  // namespace zt::train
