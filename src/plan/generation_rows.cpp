// The memory plan's generation rows (plan_rows.hpp): an engine's KV cache and the weights it gathers (RL's
// rollouts, the answer evaluation), RL's packed rollouts and KL reference, PPO's critic.
#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "model/cost.hpp"
#include "model/tp_split.hpp"
#include "plan/plan_rows.hpp"
#include "rl/rollouts.hpp"

namespace zt::plan {

std::uint64_t add_generation(MemoryPlan& p, const config::Config& config, const model::ParamTable& table,
                    const std::optional<model::ParamTable>& adapters, int tp, DType compute,
                    const gen::EngineOptions& engine, const std::string& what, const std::string& known,
                    config::Device device) {
  const model::GptShape shape = model::model_shape(config.model);
  const std::uint64_t workspace = device == config::Device::kCuda ? 0 : gen::Engine::cpu_workspace_bytes(shape, tp, engine);
  p.rows.push_back({what + " engine", gen::Engine::bytes(shape, tp, engine, device == config::Device::kCuda),
                    cat(engine.slots, " sequences of ", engine.max_len, " tokens (",
                        known.empty() ? "model.seq_len, their bound" : known,
                        "): KV cache, activations, logits; freed after"),
                    Phase::kGeneration});
  if (adapters) {  // micro-batch rows of seq_len
    const std::int64_t rows = gen::forward_rows(engine);
    const int micro = static_cast<int>((rows + shape.seq_len - 1) / shape.seq_len);
    p.rows.push_back({what + " adapters", model::Lora::scratch_bytes(shape, static_cast<int>(config.lora.rank), micro, compute, tp),
                      cat("LoRA scratch of the ", what, " engine's passes (", micro, " x ", shape.seq_len, " rows)")});
  }
  if (config.train.zero_stage == 3) {
    const bool nf4 = adapters && config.lora.base_dtype == config::LoraBaseDtype::kNf4;
    // An NF4 base held whole dequantizes a block at a time, as the frozen base of ZeRO 0-2 does.
    std::uint64_t bytes = nf4 ? model::nf4_held_bytes(table, compute, model::nf4_store_options(config)) +
                                    model::nf4_unit_scratch_bytes(table, compute, model::nf4_store_options(config))
                              : table.numel() * dtype_size(compute);
    if (adapters) bytes += adapters->numel() * dtype_size(compute);
    p.rows.push_back({what + " weights", bytes,
                      cat(nf4 ? "NF4 base (and a block dequantized)" : dtype_name(compute), adapters ? " and adapters" : "",
                          ", ZeRO-3: the whole weights gathered while the engine runs"),
                      Phase::kGeneration});
  }
  return workspace;
}

std::int64_t generation_len(const config::Config& config, std::int64_t known) {
  return known > 0 ? std::min(known, config.model.seq_len) : config.model.seq_len;
}

std::uint64_t add_rollouts(MemoryPlan& p, const config::Config& config, const model::ParamTable& table,
                  const std::optional<model::ParamTable>& adapters, std::int64_t dp, int tp, DType compute,
                  std::int64_t known_len, std::int64_t prompt_len, config::Device device) {
  const model::GptShape shape = model::model_shape(config.model);
  const std::uint64_t workspace = add_generation(p, config, table, adapters, tp, compute,
                 rl::engine_options(config, generation_len(config, known_len), dp, prompt_len), "rollout",
                 known_len > 0 ? "the longest prompt + rl.max_new_tokens" : "", device);
  if (config.rl.pack_rollouts) {  // the model's segment starts and positions, [micro_batch, seq_len] i32 each
    const bool ppo = config.rl.algorithm == config::RlAlgorithm::kPpo;
    const std::uint64_t bytes = 2ull * static_cast<std::uint64_t>(config.train.micro_batch * shape.seq_len) *
                                sizeof(std::int32_t) * (ppo ? 2 : 1);
    p.rows.push_back({"packed rollouts", bytes,
                      cat("rl.pack_rollouts: each pass's segment starts and positions", ppo ? " (actor and critic)" : "")});
  }
  if (config.rl.kl_coef == 0 || config.lora.rank > 0) return workspace;  // a LoRA actor's reference is its base
  if (config.train.zero_stage < 3) {
    p.rows.push_back({"reference policy", table.numel() * dtype_size(compute), cat(dtype_name(compute), ", rl.kl_coef's initial weights")});
    return workspace;
  }
  // train::ReferencePolicy at ZeRO-3: a frozen engine over the actor's units, gathered in its forward pass.
  const optim::EngineUnits units = optim::decoder_engine_units(config, table, 0);
  const optim::Partition part = partition_of(table, dp, 3, units.ranges);
  p.rows.push_back({"reference policy", part.total_shard_numel() * dtype_size(compute),
                    cat(dtype_name(compute), ", rl.kl_coef's initial weights, 1/W slice of each unit")});
  const bool tied = shape.tie_embeddings;
  p.rows.push_back({"reference units",
                    optim::transient_peak_bytes(part, 3, compute, optim::ZeroOptions::from(config.zero), true,
                                                optim::forward_order(shape.n_layer, tied, units),
                                                optim::decoder_calls(shape.n_layer, tied, false, units)),
                    "the unit in use and the prefetched next, in its forward pass over the rollouts", Phase::kReference});
  return workspace;
}

void add_critic(MemoryPlan& p, const config::Config& config, std::int64_t dp, int tp, DType compute) {
  const model::GptShape critic = model::value_model_shape(model::model_shape(config.model));
  const model::ParamTable whole(critic);
  const model::ParamTable mine = tp > 1 ? model::tp_local_table(whole, tp) : whole;
  add_model_state(p, mine, dp, static_cast<int>(config.train.zero_stage), compute,
                  optim::offload_options(config, 1, 0, "critic"), config.zero,
                  decoder_pass(critic, optim::decoder_engine_units(config, mine, 0)),
                  gathers_per_step(config, dp), "critic ");
  const model::ModelOptions options{.micro_batch = static_cast<int>(config.train.micro_batch),
                                    .recompute = config.train.recompute, .compute = compute,
                                    .sequence_parallel = config.parallel.sequence_parallel};
  p.rows.push_back({"critic activations", model::model_activation_bytes(critic, options, tp),
                    cat(config.train.micro_batch, " x ", critic.seq_len, " tokens, the value head's")});
}

}  // namespace zt::plan
