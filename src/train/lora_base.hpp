// A LoRA run's model state beside the trainer's engine: the frozen base (its own parameter-only ZeRO
// engine: compute dtype, replicated at stages 0-2, sharded and gathered per unit at stage 3), the
// adapter table the trainer's engine optimises, and the model::Lora that applies the adapters. Under
// parallel.tp > 1 the base engine holds this rank's TP shard of the base (what the TP model reads) and
// the engine trains this rank's shard of the adapter table (model::tp_local_table of it); both are cut
// from the global base and adapters, and the checkpoint keeps the adapters global (shard_map.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/communicator.hpp"
#include "dist/grid.hpp"
#include "model/lora.hpp"
#include "model/model.hpp"
#include "optim/zero/engine.hpp"
#include "train/shard_map.hpp"
#include "train/zero_model.hpp"

namespace zt::train {

// The frozen base's gradient sink: every unit is frozen (an empty view), so the model computes no weight
// gradient for the base (its matmuls pass none; its norms write a [C] scratch the model keeps).
class FrozenGrads final : public model::GradSink {
 public:
  backend::Tensor unit(int /*u*/) override { return {}; }
};

class LoraBase {
 public:
  // base: the model's table; base_shard: the table of this rank's part that the model runs on (its TP
  // shard; base itself at tp = 1); grid: this rank's place; dp_comm: its data-parallel group, over which
  // the base is sharded at train.zero_stage=3 (only there). The tables must outlive this.
  LoraBase(backend::Backend& backend, dist::Communicator& dp_comm, const config::Config& config,
           const model::ParamTable& base, const model::ParamTable& base_shard, const dist::Grid& grid, DType compute);

  const model::ParamTable& adapter_table() const { return adapters_; }               // global: the checkpoint's
  const model::ParamTable& adapter_shard_table() const { return adapter_shard_; }  // this TP rank's: the engine's
  const model::LoraSpec& spec() const { return spec_; }
  optim::ZeroEngine& base_engine() { return *base_engine_; }  // parameters only (frozen)
  // Connects the adapters to the model and to the engine that trains them.
  void attach(model::Model& model, optim::ZeroEngine& adapter_engine, int micro_batch);
  // Loads the base from init.from (or the seed's random init when empty); returns the SHA-256 of its
  // fp32 weights (the checkpoint's reference to its base).
  std::string load_base(const std::string& from, std::uint64_t seed);
  // A new run: the base (init.from, or the base a PEFT adapter directory there names) and the adapters
  // (that directory's, else PEFT's init from train.seed) into the engine that trains them; shards: the
  // adapters' ShardMap under tp > 1 (this rank's shard read from the global values), else null.
  void init(const config::Config& config, optim::ZeroEngine& adapter_engine, const ShardMap* shards = nullptr);
  // A resumed run (the adapters come from the checkpoint): the base again, refused (InputError) unless its
  // hash is the checkpoint's.
  void reload_base(const config::Config& config, const std::string& checkpoint_sha256, const std::string& checkpoint);
  const std::string& base_sha256() const { return base_sha256_; }  // of the loaded base
  // The order of the next pass's unit requests, for both engines (stage 3 prefetches along it).
  void expect_access_order(optim::ZeroEngine& adapter_engine, bool backward);
  // Dropout (lora.dropout) on for a training micro-batch starting at global token first_row, or off.
  void set_dropout(bool on, std::uint64_t first_row = 0) { lora_->set_dropout(on, first_row); }
  std::size_t base_bytes() const { return base_engine_->memory().params; }

 private:
  backend::Backend& backend_;
  const model::ParamTable& base_;
  const model::ParamTable& base_shard_;
  dist::Grid grid_;
  model::LoraSpec spec_;
  model::ParamTable adapters_, adapter_shard_;
  std::unique_ptr<optim::ZeroEngine> base_engine_;
  std::unique_ptr<model::Lora> lora_;
  std::unique_ptr<ZeroParams> adapter_params_;
  std::unique_ptr<ZeroGrads> adapter_grads_;
  DType compute_;
  std::string base_sha256_;
};

// The block order of the adapter units (unit l = block l) in a pass: forward 0..L-1, then backward L-1..0.
std::vector<int> lora_access_order(int n_layer, bool backward);

}  // namespace zt::train
