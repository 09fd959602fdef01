// The memory plan's rows by term, for plan_memory (memory_plan.cpp) to assemble into one rank's plan:
// model state (state_rows.cpp: parameters, gradients, optimizer state, ZeRO's transients, offload, LoRA's
// frozen base) and generation (generation_rows.cpp: an engine's KV cache and weights, RL's rollouts and
// reference, PPO's critic). Internal to plan/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "gen/engine.hpp"
#include "model/model.hpp"
#include "model/nf4_params.hpp"
#include "optim/zero/model_adapters.hpp"
#include "optim/zero/offload.hpp"
#include "optim/zero/partition.hpp"
#include "optim/zero/transients.hpp"
#include "plan/memory_plan.hpp"

namespace zt::plan {

// A ZeRO partition of `t` over `world` ranks at `stage`. units: the engine's (optim::EngineUnits); empty:
// the table's.
optim::Partition partition_of(const model::ParamTable& t, std::int64_t world, int stage,
                              const std::vector<optim::FlatRange>& units = {});

// "12.3 MiB"
std::string mib(std::uint64_t bytes);

// The data-parallel ranks of `world` under the config's parallel.tp and parallel.pp (at least 1).
std::int64_t data_parallel_ranks(const config::Config& config, std::int64_t world);

// The whole model's parameter table for `shape`, built once for the last shape asked (the search plans
// and costs every layout of one model: a table of thousands of blocks per layout was most of its time).
std::shared_ptr<const model::ParamTable> whole_table(const model::GptShape& shape);

// One training micro-batch as an engine sees it: the access order it is told and the calls it gets.
struct EnginePass {
  std::vector<int> order;
  std::vector<optim::UnitEvent> calls;
  bool decoder = false, tied = false;  // a decoder's units (its own engine options: decoder_zero_options)
  int n_layer = 0;
  std::vector<optim::FlatRange> units;  // the engine's units (split vocabulary units' pieces); empty: the table's
};
// The decoder's units (the whole model, a TP shard's, LoRA's frozen base, the critic); `units` with
// split vocabulary units (optim::split_vocab_pieces) for the trained model.
EnginePass decoder_pass(const model::GptShape& s, const optim::EngineUnits& units = {});
// LoRA's adapter engine: a unit per block.
EnginePass adapter_pass(const model::GptShape& s);

// How many times a step gathers each ZeRO-3 unit: its forward and its backward, per micro-batch.
std::int64_t gathers_per_step(const config::Config& c, std::int64_t dp);

// Model-state rows (parameters, gradients, optimizer state) and the stage's transient buffers over `pass`.
// prefix names the rows ("adapter " for LoRA's); offload.threads > 0: ZeRO-Offload's state.
void add_model_state(MemoryPlan& p, const model::ParamTable& table, std::int64_t world, int stage, DType compute,
                     const optim::OffloadOptions& offload, const config::ZeroConfig& zero_config, const EnginePass& pass,
                     std::int64_t gathers, const std::string& prefix = "");

// LoRA's frozen base: its compute-dtype weights (a 1/W slice at stage 3, which also holds the gathered
// unit in use and the prefetched next one); or (lora.base_dtype=nf4) the NF4 base as model::Nf4Params
// holds it, replicated (a 1/W slice of each unit's bytes at stage 3, which gathers the whole bytes of the
// unit in use and the prefetched next), and the block it dequantizes for the model (one at a time).
void add_frozen_base(MemoryPlan& p, const model::ParamTable& base, std::int64_t world, int stage, DType compute,
                     const std::optional<model::Nf4Options>& nf4, const optim::ZeroOptions& zero,
                     const optim::OffloadOptions& offload, std::int64_t gathers,
                     const std::vector<model::UnitPieces>& pieces);

// A generation engine beside the training state (`what`: "rollout", RL's; "evaluation", log.eval_prompts'),
// made for its passes and freed after (Phase::kGeneration): its KV cache, prefill and decoding activations
// and logits; at ZeRO-3 the whole weights gathered for it (a LoRA run's base, as its NF4 bytes with
// lora.base_dtype=nf4, and its adapters: this rank's tables `table` and `adapters`); a LoRA run's scratch
// for the engine's passes (LoraBase::attach_generation, kept). `known`: the sequences' length was read
// from the prompts (the trainer), not bounded by model.seq_len (--plan). device: the backend's (CUDA's
// attention over the cache has a scratch of its own).
// Returns the engine's CPU scratch (gen::Engine::cpu_workspace_bytes; 0 on CUDA), which shares the plan's
// workspace row (the larger counts).
std::uint64_t add_generation(MemoryPlan& p, const config::Config& config, const model::ParamTable& table,
                    const std::optional<model::ParamTable>& adapters, int tp, DType compute,
                    const gen::EngineOptions& engine, const std::string& what, const std::string& known,
                    config::Device device);

// The sequence length a generation engine plans: `known` (> 0, read from the prompts) or model.seq_len.
std::int64_t generation_len(const config::Config& config, std::int64_t known);

// RL (rl.prompts): the rollouts' engine (rl::engine_options, up to the rank's sequences as slots); the
// initial policy's weights for the KL term (a LoRA actor's reference is its base); the packed rollouts'
// per-token layout (rl.pack_rollouts).
// Returns the rollout engine's CPU scratch, as add_generation.
std::uint64_t add_rollouts(MemoryPlan& p, const config::Config& config, const model::ParamTable& table,
                  const std::optional<model::ParamTable>& adapters, std::int64_t dp, int tp, DType compute,
                  std::int64_t known_len, std::int64_t prompt_len, config::Device device);

// PPO's critic (train/critic.hpp): a value-head copy of the model on the same layout, with its own
// gradients and optimizer state, and the activations of its forward and backward (taken while the
// actor's are free: the updates run one model at a time, so the larger set counts, the plan adds both).
void add_critic(MemoryPlan& p, const config::Config& config, std::int64_t dp, int tp, DType compute);

}  // namespace zt::plan
