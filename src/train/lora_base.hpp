// A LoRA run's model state beside the trainer's engine: the frozen base (its own parameter-only ZeRO
// engine: compute dtype, replicated at stages 0-2, sharded and gathered per unit at stage 3), the
// adapter table the trainer's engine optimises, and the model::Lora that applies the adapters. Under a
// pipeline (parallel.pp > 1) or tensor parallelism (parallel.tp > 1) a rank holds its part of both (its
// stages', its TP shard, or both): the base through the model's ShardMap, the adapters (their TP shard:
// model/tp_split.hpp) through their own (shard_map.hpp), so the checkpoint's adapters and the base's
// hash stay those of the whole model. With lora.base_dtype=nf4 the base is QLoRA's: its blocks' matmul
// weights in NF4 blocks of 64 (model/nf4_params.hpp), quantized at load after the TP cut (the rank's shard
// in blocks of its own), held whole on every rank at ZeRO 0-2 and sharded over the data-parallel group at
// ZeRO-3 (each unit's quantized bytes gathered before use).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/communicator.hpp"
#include "dist/world.hpp"
#include "model/device_weights.hpp"
#include "model/lora.hpp"
#include "model/model.hpp"
#include "model/nf4_params.hpp"
#include "optim/zero/engine.hpp"
#include "optim/zero/model_adapters.hpp"
#include "train/shard_map.hpp"

namespace zt::train {

// The frozen base's gradient sink: every unit is frozen (an empty view), so the model computes no weight
// gradient for the base (its matmuls pass none; its norms write a [C] scratch the model keeps).
class FrozenGrads final : public model::GradSink {
 public:
  backend::Tensor unit(int /*u*/) override { return {}; }
};

// Another's parameters, by reference (the trainer owns its ParamSource; LoraBase owns an NF4 base).
class BorrowedParams final : public model::ParamSource {
 public:
  explicit BorrowedParams(model::ParamSource& p) : p_(p) {}
  backend::Tensor unit(int u) override { return p_.unit(u); }
  void release(int u) override { p_.release(u); }
  int pieces(int u) const override { return p_.pieces(u); }
  backend::Tensor piece(int u, int i) override { return p_.piece(u, i); }
  void release_piece(int u, int i) override { p_.release_piece(u, i); }

 private:
  model::ParamSource& p_;
};

class LoraBase {
 public:
  // base: the whole model's table; comm: the data-parallel group (the base is sharded over it at
  // train.zero_stage 3 only); part: this rank's part of the model (parallel.pp or tp > 1), null for the whole;
  // base_offload: where a sharded bf16/fp32 base lives with train.offload=params (offload_options' "base").
  LoraBase(backend::Backend& backend, dist::Communicator& comm, const config::Config& config,
           const model::ParamTable& base, DType compute, const ShardMap* part = nullptr,
           const optim::OffloadOptions& base_offload = {});

  const model::ParamTable& adapter_table() const { return adapters_; }     // the whole model's (checkpoints)
  const model::ParamTable& adapter_part() const { return adapter_part_; }  // this rank's (its engine's)
  const ShardMap* adapter_map() const { return adapter_map_ ? &*adapter_map_ : nullptr; }  // null: the whole
  const model::LoraSpec& spec() const { return spec_; }
  // lora.base_dtype=nf4: the base in NF4 blocks (model/nf4_params.hpp), else in the compute dtype in a
  // parameters-only (frozen) ZeRO engine.
  bool nf4() const { return nf4_ != nullptr; }
  optim::ZeroEngine& base_engine() { return *base_engine_; }  // not nf4()
  const optim::EngineUnits& base_units() const { return base_units_; }  // base_engine()'s or nf4_base()'s
  model::Nf4Params& nf4_base() { return *nf4_; }              // nf4()
  // The base as the model reads it (the engine's units, gathered at stage 3; or the NF4 units, dequantized).
  std::unique_ptr<model::ParamSource> base_source();
  // The adapters, reading and training through the engine that trains them: the model(s) take it
  // (Model::set_lora; a pipeline's every stage model).
  model::Lora& attach(optim::ZeroEngine& adapter_engine, int micro_batch);
  model::Lora& lora() { return *lora_; }  // attach's
  // The same adapters for generation (RL's rollouts, after attach): forward only, for forwards of up to
  // `rows` rows (gen::forward_rows), reading the adapter engine's live weights.
  model::Lora& attach_generation(std::int64_t rows);
  // The generation adapters read `adapters` (a whole copy gathered at ZeRO-3, which the caller keeps)
  // from here on; null: the adapter engine's again.
  void bind_generation(model::ParamSource* adapters);
  // Loads the base from init.from (or the seed's random init when empty); returns the SHA-256 of its
  // fp32 weights (the checkpoint's reference to its base), given to `check` first. Every rank reads it:
  // a bad base, or `check`'s error, is printed once (ReportedError; train/shared_input.hpp).
  std::string load_base(const dist::World& world, const std::string& from, std::uint64_t seed,
                        const std::function<void(const std::string& sha256)>& check = {});
  // A new run: the base (init.from, or the base a PEFT adapter directory there names) and the adapters
  // (that directory's, else PEFT's init from train.seed) into the engine that trains them.
  void init(const dist::World& world, const config::Config& config, optim::ZeroEngine& adapter_engine);
  // A resumed run (the adapters come from the checkpoint): the base again, refused (InputError, printed
  // once) unless its hash is the checkpoint's.
  void reload_base(const dist::World& world, const config::Config& config, const std::string& checkpoint_sha256,
                   const std::string& checkpoint);
  const std::string& base_sha256() const { return base_sha256_; }  // of the loaded base
  // The order of the next pass's unit requests, for both engines (stage 3 prefetches along it).
  void expect_access_order(optim::ZeroEngine& adapter_engine, bool backward);
  // Dropout (lora.dropout) on for a training micro-batch starting at global token first_row, or off.
  void set_dropout(bool on, std::uint64_t first_row = 0) { lora_->set_dropout(on, first_row); }
  // Dropout on for runs of the micro-batch's rows (model::Lora::set_dropout_rows: RL's packed rollouts).
  void set_dropout_rows(std::vector<model::Lora::DropoutRows> rows) { lora_->set_dropout_rows(std::move(rows)); }
  std::size_t base_bytes() const { return nf4_ ? nf4_->held_bytes() : base_engine_->memory().params; }

 private:
  void load_nf4_base(const ReadGlobal& read, const model::SafetensorsReader* file, const std::string& from);
  ReadGlobal whole_tensors_quantized(ReadGlobal read, model::Nf4Params::StoredOf stored_of) const;  // load_base under TP
  void warn_requantized(const std::string& from, int block, bool nested) const;
  void warn_unaligned_nf4_shards() const;  // load_base under TP
  backend::Backend& backend_;
  const model::ParamTable& base_;
  const ShardMap* part_;
  model::LoraSpec spec_;
  model::ParamTable adapters_;
  model::ParamTable adapter_part_;
  std::optional<ShardMap> adapter_map_;
  optim::EngineUnits base_units_;  // the base's units: the held table's, split vocabulary units at ZeRO-3
  std::unique_ptr<optim::ZeroEngine> base_engine_;  // null with nf4_
  std::unique_ptr<model::Nf4Params> nf4_;
  model::Nf4Options quantization_;  // nf4_'s base quantization over whole tensors (nf4_options)
  std::unique_ptr<model::Lora> lora_, generation_lora_;
  std::unique_ptr<optim::ZeroParams> adapter_params_;
  std::unique_ptr<optim::ZeroGrads> adapter_grads_;
  DType compute_;
  std::string base_sha256_;
};

// What a generation engine (RL's rollouts, the answer evaluation) reads: the trainer's weights as they are
// at ZeRO 0-2; at ZeRO-3 whole copies gathered first, since the ranks then decode different numbers of
// steps and cannot meet in per-unit gathers: the model's weights, or a LoRA run's base (compute dtype, or
// its NF4 bytes) and adapters (the generation adapters read that copy while it lives).
struct GenerationWeights {
  model::ParamSource* base = nullptr;               // the model's (a LoRA run's base) weights
  std::unique_ptr<model::DeviceWeights> whole;      // ZeRO-3: the model's, or a compute-dtype base's, gathered
  std::unique_ptr<model::Nf4Params> nf4;            // ZeRO-3: an NF4 base's bytes, gathered
  std::unique_ptr<model::DeviceWeights> adapters;   // ZeRO-3: a LoRA run's adapters, gathered
  LoraBase* lora = nullptr;                         // its generation adapters read `adapters` until this goes
  GenerationWeights() = default;
  GenerationWeights(const GenerationWeights&) = delete;
  GenerationWeights& operator=(const GenerationWeights&) = delete;
  ~GenerationWeights() {
    if (lora) lora->bind_generation(nullptr);
  }
  model::ParamSource& params() { return *base; }
};

}  // namespace zt::train
