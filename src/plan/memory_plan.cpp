// Byte counts per rank, term by term:
//   model state  from the ZeRO partition: stage 0 replicates 4 x psi (params, grads, m, v), stage 1
//                shards m and v, stage 2 also the gradients, stage 3 also the parameters (W-padded);
//                mixed precision keeps 16-bit working parameters plus an fp32 master of the rank's
//                slice (gradients stay fp32); offload moves m, v (and the master) off the device;
//   offload      rows apart from the device total (optim::offload_footprint, as the run allocates):
//                offload.to=host holds that state and a gradient staging buffer in host memory;
//                offload.to=nvme a few chunk buffers in host memory, the state in a file per rank,
//                and reads and writes the whole file every step;
//   transients   the ZeRO engine's buffers replayed over one micro-batch's calls (optim/zero/transients.hpp,
//                equal to the engine's own count): stages 2-3 hold a unit's fp32 gradient while the backward
//                adds to it, then its reduction and reduced slice, two in flight (one where two exceed
//                zero.bucket_mb); stage 3 gathers the unit in use and prefetches the next;
//   activations  the model's own layout for one micro-batch (model::model_activation_bytes: the
//                decoder's carve, at any parallel.tp);
//   parallel.pp  each pipeline rank's own plan: its stages' table (model::PipelineCut::table, a tied
//                head's copy of the embedding on the last), ZeRO-sharded over world/(tp x pp), and for
//                each of its chunks the activation sets the schedule keeps in flight (model::in_flight
//                over model::pipeline_ops, as the trainer allocates) x that chunk's bytes; the busiest
//                rank's plan is the prediction (1F1B: usually stage 0, which holds the most in flight);
//   parallel.tp  the model state above is the rank's TP shard (model::tp_local_table), ZeRO-sharded
//                over the world/tp data-parallel ranks;
//   lora         with lora.rank > 0 the rows above are the adapters' (their own ZeRO state), and the base is
//                one frozen row: its weights in the compute dtype, replicated at stages 0-2 and a 1/W slice
//                at stage 3 (which gathers the unit in use and the next), no gradient, master or optimizer
//                state; the adapters add their scratch to the activations (model::Lora::scratch_bytes);
//                under a pipeline, the rank's part of the base and its blocks' adapters; under parallel.tp
//                the TP shard of both (model::adapter_part_table), with the TP rank's LoRA scratch;
//   workspace    the backend's scratch (CPU: attention, fp32 copies of 16-bit operands; CUDA: the
//                cuBLASLt workspace and the flash-attention backward's row terms).
#include "plan/memory_plan.hpp"

#include <optional>


#include "gen/engine.hpp"
#include "rl/rollouts.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "backend/backend.hpp"
#include "config/lora.hpp"
#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/error.hpp"
#include "layers/chunked_lm_loss.hpp"
#include "model/cost.hpp"
#include "model/model.hpp"
#include "model/pipeline_schedule.hpp"
#include "model/stage_split.hpp"
#include "model/tp_split.hpp"
#include "optim/zero/model_adapters.hpp"
#include "optim/zero/offload.hpp"
#include "optim/zero/partition.hpp"
#include "optim/zero/transients.hpp"

namespace zt::plan {
namespace {

// units: the engine's (optim::EngineUnits); empty: the table's.
optim::Partition partition_of(const model::ParamTable& t, std::int64_t world, int stage,
                              const std::vector<optim::FlatRange>& units = {}) {
  const std::int64_t w = stage == 0 ? 1 : world;  // stage 0 replicates: no padding
  return optim::Partition(units.empty() ? optim::units_of(t) : units, {}, static_cast<int>(w), 0);
}

std::string mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

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
EnginePass decoder_pass(const model::GptShape& s, const optim::EngineUnits& units = {}) {
  return {optim::forward_backward_order(s.n_layer, s.tie_embeddings, units),
          optim::decoder_calls(s.n_layer, s.tie_embeddings, true, units), true, s.tie_embeddings, s.n_layer,
          units.pieced() ? units.ranges : std::vector<optim::FlatRange>{}};
}
// LoRA's adapter engine: a unit per block.
EnginePass adapter_pass(const model::GptShape& s) {
  return {optim::adapter_access_order(s.n_layer, true), optim::adapter_calls(s.n_layer, true)};
}

// How many times a step gathers each ZeRO-3 unit: its forward and its backward, per micro-batch.
std::int64_t gathers_per_step(const config::Config& c, std::int64_t dp) {
  const std::int64_t per_micro = std::max<std::int64_t>(1, c.train.micro_batch * dp);
  return 2 * std::max<std::int64_t>(1, c.train.global_batch / per_micro);
}

// ZeRO-Offload's rows off the device for a shard of `shard` elements (the engine named `name`'s file).
// x: the compute dtype's bytes (the updated working parameters go back to the device in it; 0: they stay
// off it, train.offload=params).
void add_offload_rows(MemoryPlan& p, std::uint64_t shard, std::uint64_t x, const optim::OffloadOptions& o,
                      const std::string& prefix) {
  const optim::OffloadFootprint f = optim::offload_footprint(static_cast<std::int64_t>(shard), o);
  p.host_bytes += f.host_bytes;
  if (o.nvme_file.empty()) {
    p.offload_rows.push_back({prefix + "host: optimizer state", f.host_bytes,
                              "offload.to=host: fp32 master, AdamW m and v of the rank's slice, gradient staging"});
    p.offload_rows.push_back({prefix + "PCIe traffic per step", shard * (sizeof(float) + x),
                              x > 0 ? "the fp32 gradient slice to the host, the updated parameters back in the compute dtype"
                                    : "the fp32 gradient slice to the host (the updated parameters stay there: train.offload=params)"});
    return;
  }
  const std::string file = (o.nvme_file.parent_path().parent_path() / "rank_<r>" / o.nvme_file.filename()).string();
  p.offload_rows.push_back({prefix + "host: NVMe buffers", f.host_bytes,
                            cat("offload.to=nvme: 3 chunks of ", mib(f.transfer_bytes), " (read ahead, updating, written "
                                "behind), gradient staging, an access window")});
  p.nvme_bytes += f.disk_bytes;
  p.offload_rows.push_back({prefix + "NVMe file", f.disk_bytes,
                            cat(file, ", preallocated: fp32 master, AdamW m and v of the rank's slice")});
  p.offload_rows.push_back({prefix + "NVMe traffic per step", 2 * f.disk_bytes,
                            cat("the file read and written once a step (", mib(f.disk_bytes), " each way): the step "
                                "waits on the disk where that takes longer than the host AdamW")});
}

// train.offload=params' rows off the device for a stage-3 engine over `part` (param_store.hpp): the
// shard in host memory, or on NVMe with four slice buffers; each gather reads its unit's slice from there
// (gathers: how many times a step gathers every unit), the step writes the updated shard back.
void add_param_offload_rows(MemoryPlan& p, const optim::Partition& part, DType compute, const optim::OffloadOptions& o,
                            std::int64_t gathers, const std::string& prefix) {
  const bool nvme = !o.params_file.empty();
  const optim::ParamStoreFootprint f = optim::ParamStore::footprint(part, compute, nvme);
  const std::uint64_t shard = part.total_shard_numel() * dtype_size(compute);
  const std::string xs(dtype_name(compute));
  p.host_bytes += f.host_bytes;
  p.offload_rows.push_back({prefix + "PCIe per step, params", shard * static_cast<std::uint64_t>(gathers),
                            cat("each unit's ", xs, " slice up to the device before each of its ", gathers,
                                " gathers a step (forward and backward of each micro-batch)")});
  if (!nvme) {
    p.offload_rows.push_back({prefix + "host: parameters", f.host_bytes,
                              cat("train.offload=params, offload.to=host: the ", xs, " 1/W slice of each unit")});
    return;
  }
  const std::string file = (o.params_file.parent_path().parent_path() / "rank_<r>" / o.params_file.filename()).string();
  p.offload_rows.push_back({prefix + "host: NVMe param bufs", f.host_bytes,
                            "4 slices of the largest unit: 2 read ahead of their gathers, 2 written behind the step"});
  p.nvme_bytes += f.disk_bytes;
  p.offload_rows.push_back({prefix + "NVMe file, parameters", f.disk_bytes,
                            cat(file, ", preallocated: the ", xs, " 1/W slice of each unit, 4 KiB-aligned")});
  p.offload_rows.push_back({prefix + "NVMe per step, params", f.disk_bytes * static_cast<std::uint64_t>(gathers + 1),
                            cat("the file read at each of the ", gathers, " gathers of every unit and written once by the step")});
}

// Model-state rows (parameters, gradients, optimizer state) and the stage's transient buffers over `pass`.
// prefix names the rows ("adapter " for LoRA's); offload.threads > 0: ZeRO-Offload's state.
void add_model_state(MemoryPlan& p, const model::ParamTable& table, std::int64_t world, int stage, DType compute,
                     const optim::OffloadOptions& offload, const config::ZeroConfig& zero_config, const EnginePass& pass,
                     std::int64_t gathers, const std::string& prefix = "") {
  const bool offloaded = offload.threads > 0, params_offloaded = offload.params && stage == 3;
  const optim::Partition part = partition_of(table, world, stage, pass.units);
  const std::uint64_t x = dtype_size(compute), f = sizeof(float);
  const std::uint64_t full = part.total_padded_numel(), shard = part.total_shard_numel();
  const bool mixed = compute != DType::kF32;
  const std::string xs(dtype_name(compute));
  std::uint64_t params = (stage <= 2 ? full : shard) * x;
  std::string note = stage <= 2 ? xs + ", replicated" : xs + ", 1/W slice of each unit";
  if (mixed && !offloaded) {
    params += shard * f;
    note += stage == 0 ? " + fp32 master, replicated" : " + fp32 master of the 1/W slice";
  }
  if (params_offloaded) {
    params = 0;
    note = cat("offloaded (train.offload=params) to ", offload.params_file.empty() ? "host memory" : "NVMe", ": below");
  }
  p.rows.push_back({prefix + "parameters", params, note});
  p.rows.push_back({prefix + "gradients", (stage <= 1 ? full : shard) * f, stage <= 1 ? "fp32, full" : "fp32, 1/W slice"});
  p.rows.push_back({prefix + "optimizer state", offloaded ? 0 : 2 * shard * f,
                    offloaded ? cat("offloaded (train.offload=optimizer) to ", offload.nvme_file.empty() ? "host memory" : "NVMe",
                                    ": below, with the master")
                              : stage == 0 ? "AdamW m and v, replicated" : "AdamW m and v, 1/W slice"});
  if (offloaded) add_offload_rows(p, shard, params_offloaded ? 0 : x, offload, prefix);
  if (params_offloaded) add_param_offload_rows(p, part, compute, offload, gathers, prefix);
  if (stage < 2) return;
  const optim::ZeroOptions zero = pass.decoder ? optim::decoder_zero_options(zero_config, part, stage, compute, pass.n_layer, pass.tied)
                                               : optim::ZeroOptions::from(zero_config);
  const std::uint64_t transient = optim::transient_peak_bytes(part, stage, compute, zero, false, pass.order, pass.calls);
  std::string what = cat("the fp32 unit gradient being summed and two in reduction (one where two exceed zero.bucket_mb, ",
                         zero.reduce_in_compute && mixed ? xs : "fp32", ") with their reduced slices");
  if (pass.tied) what += zero.reduce_tied_early ? "; the tied head's share reduced early" : "; the tied head's share held to the end";
  if (stage == 3) what += "; the gathered parameter unit in use and the prefetched next";
  if (!pass.units.empty()) what += "; the token embedding and the LM head in units of the loss's chunks (zero.split_vocab)";
  // Transient: a step's (PPO's critic steps before the actor, never with it).
  p.rows.push_back({prefix + (prefix.empty() ? "communication buffers" : "comm buffers"), transient, what,
                    prefix == "critic " ? Phase::kCriticUpdate : Phase::kUpdate});
}

// LoRA's frozen base: its compute-dtype weights (a 1/W slice at stage 3, which also holds the gathered
// unit in use and the prefetched next one); or (lora.base_dtype=nf4) the NF4 base as model::Nf4Params
// holds it, replicated (a 1/W slice of each unit's bytes at stage 3, which gathers the whole bytes of the
// unit in use and the prefetched next), and the block it dequantizes for the model (one at a time).
void add_frozen_base(MemoryPlan& p, const model::ParamTable& base, std::int64_t world, int stage, DType compute,
                     const std::optional<model::Nf4Options>& nf4, const optim::ZeroOptions& zero,
                     const optim::OffloadOptions& offload, std::int64_t gathers,
                     const std::vector<model::UnitPieces>& pieces) {
  const std::vector<model::UnitPieces> split = stage == 3 ? pieces : std::vector<model::UnitPieces>{};
  const optim::EngineUnits units = optim::engine_units(base, split);
  const std::string split_note = split.empty() ? "" : "; the token embedding and the LM head in units of the loss's chunks (zero.split_vocab)";
  if (nf4) {
    const int shards = stage == 3 ? static_cast<int>(world) : 1;
    p.rows.push_back({"frozen base", model::nf4_held_bytes(base, compute, *nf4, shards, split),
                      cat("NF4 blocks of ", nf4->block, nf4->double_quant ? " (double quantization)" : "", ": the blocks' ",
                          "matmul weights as 4-bit codes + scales, the rest ", dtype_name(compute),
                          shards > 1 ? "; 1/W of each unit's bytes" : "; replicated")});
    if (shards == 1) {
      p.rows.push_back({"dequantized base unit", model::nf4_unit_scratch_bytes(base, compute, *nf4),
                        cat("the block in use, ", dtype_name(compute))});
      return;
    }
    const std::vector<int> order = optim::forward_backward_order(base.shape().n_layer, base.shape().tie_embeddings, units);
    p.rows.push_back({"gathered base units", model::nf4_sharded_transient_bytes(base, compute, *nf4, shards, order, split),
                      cat("the unit in use (a block dequantized, ", dtype_name(compute),
                          ") and the prefetched next one's quantized bytes", split_note),
                      Phase::kUpdate});
    return;
  }
  const optim::Partition part = partition_of(base, world, stage == 3 ? 3 : 0, stage == 3 ? units.ranges : std::vector<optim::FlatRange>{});
  const std::uint64_t x = dtype_size(compute);
  const std::string xs(dtype_name(compute));
  if (stage < 3) {
    p.rows.push_back({"frozen base", part.total_padded_numel() * x, xs + ", replicated; no gradient, master or optimizer state"});
    return;
  }
  if (offload.params) {
    p.rows.push_back({"frozen base", 0, cat("offloaded (train.offload=params) to ", offload.params_file.empty() ? "host memory" : "NVMe",
                                            ": below; no gradient, master or optimizer state")});
    add_param_offload_rows(p, part, compute, offload, gathers, "base ");
  } else {
    p.rows.push_back({"frozen base", part.total_shard_numel() * x, xs + ", 1/W slice of each unit; no gradient, master or optimizer state"});
  }
  const EnginePass pass = decoder_pass(base.shape(), units);
  p.rows.push_back({"gathered base units", optim::transient_peak_bytes(part, 3, compute, zero, true, pass.order, pass.calls),
                    "the unit in use and the prefetched next" + split_note, Phase::kUpdate});
}
}  // namespace


std::uint64_t cuda_workspace_bytes(const model::GptShape& s, int micro_batch) {
  const std::uint64_t rows = static_cast<std::uint64_t>(micro_batch) * s.seq_len;
  const std::uint64_t cublaslt = 32ull << 20;
  const std::uint64_t attention = rows * s.n_head * sizeof(float);  // D = rowsum(dO * O): the only scratch
  return cublaslt + attention;
}

std::uint64_t activation_bytes(const config::Config& c, const model::GptShape& shape, const model::Stage& stage) {
  const model::ModelOptions options{.micro_batch = static_cast<int>(c.train.micro_batch),
                                    .recompute = c.train.recompute,
                                    .compute = model::compute_dtype(c.train.precision),
                                    .stage = stage,
                                    .sequence_parallel = c.parallel.sequence_parallel,
                                    .loss_chunk = c.train.loss_chunk};
  return model::model_activation_bytes(shape, options, static_cast<int>(c.parallel.tp));
}

std::int64_t pipeline_micro_batches(const config::Config& c, std::int64_t world_size) {
  const std::int64_t pp = c.parallel.pp, dp = std::max<std::int64_t>(1, world_size / (c.parallel.tp * pp));
  const std::int64_t per_pass = c.train.micro_batch * dp;
  std::int64_t m = std::max<std::int64_t>(1, (c.train.global_batch + per_pass - 1) / per_pass);
  if (c.parallel.vpp > 1) m = (m + pp - 1) / pp * pp;  // whole groups of pp (model/pipeline_schedule.hpp)
  return m;
}

namespace {

model::PipelineCut pipeline_cut(const config::Config& c) {
  return model::PipelineCut::make(model::model_shape(c.model), static_cast<int>(c.parallel.pp),
                                  static_cast<int>(c.parallel.vpp), config::pipeline_layers(c));
}

// As below, for a cut made once (it costs a search over the blocks).
std::vector<StageActivations> rank_activations(const config::Config& c, const model::PipelineCut& cut,
                                               std::int64_t world_size, int rank) {
  const model::GptShape shape = model::model_shape(c.model);
  const int pp = cut.pp, vpp = cut.vpp;
  const std::vector<model::PipeOp> ops =
      model::pipeline_ops({pp, vpp, static_cast<int>(pipeline_micro_batches(c, world_size))}, rank);
  std::vector<StageActivations> out;
  const std::vector<model::Stage> chunks = cut.chunks(rank);
  for (int k = 0; k < vpp; ++k)
    out.push_back({chunks[static_cast<std::size_t>(k)], model::in_flight(ops, k),
                   activation_bytes(c, shape, chunks[static_cast<std::size_t>(k)])});
  return out;
}

}  // namespace

std::vector<StageActivations> pipeline_activations(const config::Config& c, std::int64_t world_size, int rank) {
  return rank_activations(c, pipeline_cut(c), world_size, rank);
}

namespace {

// The LoRA adapters (null without) of a rank whose part of the model is pipeline rank pp_rank's under
// `cut` (whole model: a cut of 1 stage).
std::optional<model::ParamTable> rank_adapters(const config::Config& c, const model::PipelineCut& cut, int pp_rank) {
  if (c.lora.rank == 0) return std::nullopt;
  return model::adapter_part_table(model::lora_table(model::model_shape(c.model), model::lora_spec(c)), cut, pp_rank,
                                   static_cast<int>(c.parallel.tp));
}

// A generation engine beside the training state (`what`: "rollout", RL's; "evaluation", log.eval_prompts'),
// made for its passes and freed after (Phase::kGeneration): its KV cache, prefill and decoding activations
// and logits; at ZeRO-3 the whole weights gathered for it (a LoRA run's base, as its NF4 bytes with
// lora.base_dtype=nf4, and its adapters: this rank's tables `table` and `adapters`); a LoRA run's scratch
// for the engine's passes (LoraBase::attach_generation, kept). `known`: the sequences' length was read
// from the prompts (the trainer), not bounded by model.seq_len (--plan).
void add_generation(MemoryPlan& p, const config::Config& config, const model::ParamTable& table,
                    const std::optional<model::ParamTable>& adapters, int tp, DType compute,
                    const gen::EngineOptions& engine, const std::string& what, const std::string& known) {
  const model::GptShape shape = model::model_shape(config.model);
  p.rows.push_back({what + " engine", gen::Engine::bytes(shape, tp, engine),
                    cat(engine.slots, " sequences of ", engine.max_len, " tokens (",
                        known.empty() ? "model.seq_len, their bound" : known,
                        "): KV cache, activations, logits; freed after"),
                    Phase::kGeneration});
  if (adapters) {  // micro-batch rows of seq_len
    const std::int64_t rows = gen::rows_for_lora(engine);
    const int micro = static_cast<int>((rows + shape.seq_len - 1) / shape.seq_len);
    p.rows.push_back({what + " adapters", model::Lora::scratch_bytes(shape, static_cast<int>(config.lora.rank), micro, compute, tp),
                      cat("LoRA scratch of the ", what, " engine's passes (", micro, " x ", shape.seq_len, " rows)")});
  }
  if (config.train.zero_stage == 3) {
    const bool nf4 = adapters && config.lora.base_dtype == config::LoraBaseDtype::kNf4;
    // An NF4 base held whole dequantizes a block at a time, as the frozen base of ZeRO 0-2 does.
    std::uint64_t bytes = nf4 ? model::nf4_held_bytes(table, compute, model::nf4_options(config)) +
                                    model::nf4_unit_scratch_bytes(table, compute, model::nf4_options(config))
                              : table.numel() * dtype_size(compute);
    if (adapters) bytes += adapters->numel() * dtype_size(compute);
    p.rows.push_back({what + " weights", bytes,
                      cat(nf4 ? "NF4 base (and a block dequantized)" : dtype_name(compute), adapters ? " and adapters" : "",
                          ", ZeRO-3: the whole weights gathered while the engine runs"),
                      Phase::kGeneration});
  }
}

// The sequence length a generation engine plans: `known` (> 0, read from the prompts) or model.seq_len.
std::int64_t generation_len(const config::Config& config, std::int64_t known) {
  return known > 0 ? std::min(known, config.model.seq_len) : config.model.seq_len;
}

// RL (rl.prompts): the rollouts' engine (rl::engine_options, up to the rank's sequences as slots); the
// initial policy's weights for the KL term (a LoRA actor's reference is its base); the packed rollouts'
// per-token layout (rl.pack_rollouts).
void add_rollouts(MemoryPlan& p, const config::Config& config, const model::ParamTable& table,
                  const std::optional<model::ParamTable>& adapters, std::int64_t dp, int tp, DType compute,
                  std::int64_t known_len) {
  const model::GptShape shape = model::model_shape(config.model);
  add_generation(p, config, table, adapters, tp, compute,
                 rl::engine_options(config, generation_len(config, known_len), dp), "rollout",
                 known_len > 0 ? "the longest prompt + rl.max_new_tokens" : "");
  if (config.rl.pack_rollouts) {  // the model's segment starts and positions, [micro_batch, seq_len] i32 each
    const bool ppo = config.rl.algorithm == config::RlAlgorithm::kPpo;
    const std::uint64_t bytes = 2ull * static_cast<std::uint64_t>(config.train.micro_batch * shape.seq_len) *
                                sizeof(std::int32_t) * (ppo ? 2 : 1);
    p.rows.push_back({"packed rollouts", bytes,
                      cat("rl.pack_rollouts: each pass's segment starts and positions", ppo ? " (actor and critic)" : "")});
  }
  if (config.rl.kl_coef == 0 || config.lora.rank > 0) return;  // a LoRA actor's reference is its base
  if (config.train.zero_stage < 3) {
    p.rows.push_back({"reference policy", table.numel() * dtype_size(compute), cat(dtype_name(compute), ", rl.kl_coef's initial weights")});
    return;
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
}

// PPO's critic (train/critic.hpp): a value-head copy of the model on the same layout, with its own
// gradients and optimizer state, and the activations of its forward and backward (taken while the
// actor's are free: the updates run one model at a time, so the larger set counts, the plan adds both).
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

// The rows of one rank that holds `table` (the whole model, a TP shard or a pipeline rank's stages)
// and `activations` bytes of them, its model state ZeRO-sharded over `dp` ranks; with LoRA, `table` is
// its frozen base and `adapters` what trains.
MemoryPlan rank_plan(const config::Config& config, const model::ParamTable& table,
                     const std::optional<model::ParamTable>& adapters, std::int64_t world_size, std::int64_t dp,
                     std::uint64_t activations, const std::string& activations_note, int threads,
                     std::uint64_t capacity, config::Device device, GenerationLengths lengths = {}) {
  const model::GptShape& shape = table.shape();
  const int tp = static_cast<int>(config.parallel.tp);
  MemoryPlan p;
  p.world_size = world_size;
  p.tp = tp;
  p.zero_stage = config.train.zero_stage;
  p.micro_batch = config.train.micro_batch;
  p.capacity_bytes = capacity;
  const DType compute = model::compute_dtype(config.train.precision);
  const int stage = static_cast<int>(config.train.zero_stage);
  const optim::OffloadOptions offload = optim::offload_options(config, 1, 0, "model");  // rank 0's file names rank_<r>
  const optim::ZeroOptions zero = optim::ZeroOptions::from(config.zero);
  const int micro = static_cast<int>(config.train.micro_batch);
  if (adapters) {
    add_frozen_base(p, table, dp, stage, compute,
                    config.lora.base_dtype == config::LoraBaseDtype::kNf4 ? std::optional(model::nf4_options(config))
                                                                          : std::nullopt,
                    zero, optim::offload_options(config, 0, 0, "base"), gathers_per_step(config, dp),
                    optim::split_vocab_pieces(config, table, 0));
    add_model_state(p, *adapters, dp, stage, compute, offload, config.zero, adapter_pass(shape), gathers_per_step(config, dp),
                    "adapter ");
    activations += model::Lora::scratch_bytes(shape, static_cast<int>(config.lora.rank), micro, compute, tp);
  } else {
    const optim::EngineUnits units = optim::decoder_engine_units(config, table, 0);
    add_model_state(p, table, dp, stage, compute, offload, config.zero, decoder_pass(shape, units), gathers_per_step(config, dp));
  }
  p.rows.push_back({"activations", activations, activations_note});
  if (config.rl.enabled()) add_rollouts(p, config, table, adapters, dp, tp, compute, lengths.rollouts);
  if (!config.log.eval_prompts.empty())  // the answer evaluation at log.eval_every, between steps
    add_generation(p, config, table, adapters, tp, compute,
                   gen::evaluation_engine(gen::dealt_slots(config.log.eval_slots, lengths.evaluation_prompts,
                                                                config.log.eval_samples, dp),
                                          generation_len(config, lengths.evaluation), compute),
                   "evaluation",
                   lengths.evaluation > 0 ? "the longest prompt + log.eval_max_new_tokens" : "");
  if (config.rl.enabled() && config.rl.algorithm == config::RlAlgorithm::kPpo) add_critic(p, config, dp, tp, compute);
  if (device == config::Device::kCuda)
    p.rows.push_back({"workspace", cuda_workspace_bytes(shape, micro), "cuBLASLt workspace, attention backward scratch"});
  else
    p.rows.push_back({"workspace", model::cpu_workspace_bytes(shape, micro, tp, threads, compute, config.train.loss_chunk),
                      compute == DType::kF32 ? "attention scratch" : "attention scratch, fp32 copies of 16-bit operands"});
  p.total_bytes = peak_of(p.rows);
  return p;
}

// parallel.pp > 1: every pipeline rank's plan (its stages' table, its chunks' activation sets in
// flight); the busiest one's is returned, the others' totals beside it.
MemoryPlan pipeline_plan(const config::Config& config, std::int64_t world_size, int threads, std::uint64_t capacity,
                         config::Device device) {
  const model::GptShape shape = model::model_shape(config.model);
  const int pp = static_cast<int>(config.parallel.pp), vpp = static_cast<int>(config.parallel.vpp);
  const model::PipelineCut cut = pipeline_cut(config);
  const model::ParamTable global(shape);
  const std::int64_t dp = std::max<std::int64_t>(1, world_size / (config.parallel.tp * pp));
  const std::int64_t m = pipeline_micro_batches(config, world_size);
  MemoryPlan busiest;
  std::vector<std::uint64_t> totals, activations;
  for (int r = 0; r < pp; ++r) {
    std::uint64_t acts = 0;
    std::string sets;
    for (const StageActivations& a : rank_activations(config, cut, world_size, r)) {
      acts += static_cast<std::uint64_t>(a.in_flight) * a.bytes;
      sets += cat(sets.empty() ? "" : " + ", a.in_flight, " x ", mib(a.bytes));
    }
    const std::string note = cat(sets, " in flight (of ", m, " micro-batches of ", config.train.micro_batch, " x ",
                                 shape.seq_len, " tokens), ", dtype_name(model::compute_dtype(config.train.precision)),
                                 ", recompute=", config::to_string(config.train.recompute));
    const model::ParamTable table = model::part_table(global, cut, r, static_cast<int>(config.parallel.tp));
    MemoryPlan p = rank_plan(config, table, rank_adapters(config, cut, r), world_size, dp, acts, note, threads, capacity,
                             device);
    totals.push_back(p.total_bytes);
    activations.push_back(acts);
    if (r == 0 || p.total_bytes > busiest.total_bytes) {
      busiest = std::move(p);
      busiest.busiest_stage = r;
    }
  }
  busiest.pp = pp;
  busiest.vpp = vpp;
  busiest.stage_total_bytes = totals;
  busiest.stage_activation_bytes = activations;
  busiest.busiest_note = cut.describe_rank(shape, busiest.busiest_stage);
  return busiest;
}

}  // namespace

namespace {
MemoryPlan device_plan(const config::Config& config, std::int64_t world_size, int threads, std::uint64_t capacity,
                       config::Device device, GenerationLengths lengths) {
  if (config.parallel.pp > 1) return pipeline_plan(config, world_size, threads, capacity, device);
  const bool lora = config.lora.rank > 0;
  const model::GptShape shape = model::model_shape(config.model);
  const int tp = static_cast<int>(config.parallel.tp);
  const bool sp = config.parallel.sequence_parallel;
  const model::ParamTable global(shape);
  const model::ParamTable table = tp == 1 ? global : model::tp_local_table(global, tp);
  const int micro = static_cast<int>(config.train.micro_batch);
  const std::string split = cat(tp == 1 ? "" : cat("; 1/", tp, " of heads, MLP, vocabulary", sp ? ", residual rows (SP)" : ""),
                                lora ? " (+ LoRA scratch)" : "");
  return rank_plan(config, table, rank_adapters(config, model::PipelineCut{}, 0), world_size, world_size / tp,
                   activation_bytes(config, shape),
                   cat("one micro-batch of ", micro, " x ", shape.seq_len, " tokens, ",
                       dtype_name(model::compute_dtype(config.train.precision)), ", recompute=",
                       config::to_string(config.train.recompute), split),
                   threads, capacity, device, lengths);
}
}  // namespace

std::uint64_t peak_of(const std::vector<PlanRow>& rows) {
  std::uint64_t held = 0, phase[4] = {0, 0, 0, 0};  // kGeneration, kUpdate, kCriticUpdate, kReference
  for (const PlanRow& r : rows) (r.phase == Phase::kHeld ? held : phase[static_cast<int>(r.phase) - 1]) += r.bytes;
  return held + std::max({phase[0], phase[1], phase[2], phase[3]});
}

MemoryPlan plan_memory(const config::Config& config, std::int64_t world_size, int threads, std::uint64_t capacity,
                       config::Device device, GenerationLengths lengths) {
  MemoryPlan p = device_plan(config, world_size, threads, capacity, device, lengths);
  p.host_is_device = device == config::Device::kCpu;
  const std::int64_t ranks_per_node = std::max<std::int64_t>(1, std::min(world_size, config.plan.gpus_per_node));
  if (!p.host_is_device && config.plan.host_memory_gb > 0)
    p.host_capacity_bytes = static_cast<std::uint64_t>(config.plan.host_memory_gb * (1ull << 30)) / ranks_per_node;
  return p;
}

namespace {
// The cheapest offload tier that fits, at the first ZeRO stage where it does: train.offload=optimizer in
// host memory (ZeRO-Offload: PCIe traffic, the host AdamW), else on a node-local NVMe disk (ZeRO-Infinity:
// the state's file read and written every step, a few chunk buffers in host memory); where the optimizer
// state alone is not enough, the parameters too at ZeRO-3 (train.offload=params), host memory first.
void add_param_offload_fix(const config::Config& config, std::int64_t world, int threads, std::uint64_t capacity,
                           config::Device device, const GenerationLengths& lengths, std::vector<std::string>& out) {
  config::Config c = config;
  c.train.offload = config::Offload::kParams;
  c.train.zero_stage = 3;
  for (config::OffloadTo to : {config::OffloadTo::kHost, config::OffloadTo::kNvme}) {
    if (config.train.offload == config::Offload::kParams && to <= config.offload.to) continue;  // what it runs now
    c.offload.to = to;
    c.offload.nvme_dir = to == config::OffloadTo::kNvme ? "DIR" : "";
    const MemoryPlan p = plan_memory(c, world, threads, capacity, device, lengths);
    if (!p.fits()) continue;
    out.push_back(to == config::OffloadTo::kHost
                      ? cat("train.offload=params with train.zero_stage=3 (the optimizer state and the parameters' shard "
                            "in host memory, ", mib(p.host_bytes), " per rank; each unit's slice crosses PCIe at each gather)")
                      : cat("train.offload=params offload.to=nvme offload.nvme_dir=DIR (a node-local disk) with "
                            "train.zero_stage=3: ", mib(p.nvme_bytes), " of files per rank, ", mib(p.host_bytes),
                            " of host buffers; each unit's slice read from the disk at each gather"));
    return;
  }
}

void add_offload_fixes(const config::Config& config, std::int64_t world, int threads, std::uint64_t capacity,
                       config::Device device, const GenerationLengths& lengths, std::vector<std::string>& out) {
  if (config.lora.rank > 0) return;
  if (config.train.offload == config::Offload::kParams) return add_param_offload_fix(config, world, threads, capacity, device, lengths, out);
  const bool offloading = config.train.offload == config::Offload::kOptimizer;
  if (offloading && config.offload.to == config::OffloadTo::kNvme)
    return add_param_offload_fix(config, world, threads, capacity, device, lengths, out);
  config::Config c = config;
  c.train.offload = config::Offload::kOptimizer;
  for (std::int64_t s = std::max<std::int64_t>(1, config.train.zero_stage); s <= 3; ++s) {
    c.train.zero_stage = s;
    c.offload.to = config::OffloadTo::kHost;
    const MemoryPlan host = plan_memory(c, world, threads, capacity, device, lengths);
    if (host.fits() && !offloading) {
      out.push_back(cat("train.offload=optimizer with train.zero_stage=", s, " (the cheapest tier: host memory, ",
                        mib(host.host_bytes), " per rank)"));
      return;
    }
    c.offload.to = config::OffloadTo::kNvme;
    c.offload.nvme_dir = "DIR";
    const MemoryPlan nvme = plan_memory(c, world, threads, capacity, device, lengths);
    if (nvme.fits()) {
      out.push_back(cat("train.offload=optimizer offload.to=nvme offload.nvme_dir=DIR (a node-local disk) with "
                        "train.zero_stage=", s, ": host memory cannot hold the state (", mib(host.host_bytes),
                        " per rank); NVMe: a ", mib(nvme.nvme_bytes), " file per rank, read and written every step, ",
                        mib(nvme.host_bytes), " of host buffers"));
      return;
    }
  }
  add_param_offload_fix(config, world, threads, capacity, device, lengths, out);
}

// Full recomputation keeps one block output per layer: at long context (Llama at T=8192) the activations
// are often the largest row. Its first fitting stage here, and the fewest ranks at ZeRO-3 with it.
void add_recompute_fixes(const config::Config& config, std::int64_t world, int threads, std::uint64_t capacity,
                         config::Device device, const GenerationLengths& lengths, std::vector<std::string>& out) {
  if (config.train.recompute == config::Recompute::kFull) return;
  config::Config c = config;
  c.train.recompute = config::Recompute::kFull;
  for (std::int64_t s = config.train.zero_stage; s <= 3; ++s) {
    c.train.zero_stage = s;
    if (!plan_memory(c, world, threads, capacity, device, lengths).fits()) continue;
    out.push_back(cat("train.recompute=full with train.zero_stage=", s));
    return;
  }
  c.train.zero_stage = 3;
  for (std::int64_t w = world * 2; w <= world * 64; w *= 2)
    if (plan_memory(c, w, threads, capacity, device, lengths).fits()) {
      out.push_back(cat(w, " ranks at train.zero_stage=3 with train.recompute=full"));
      return;
    }
}

// ZeRO 2-3's transient buffers on this layout: the zero.* keys that bound them, where one (or both) makes
// the plan fit as it stands (the same stage, micro-batch and ranks).
void add_zero_buffer_fixes(const config::Config& config, std::int64_t world, int threads, std::uint64_t capacity,
                           config::Device device, const GenerationLengths& lengths, std::vector<std::string>& out) {
  if (config.train.zero_stage < 2) return;
  std::vector<std::pair<std::string, std::function<void(config::Config&)>>> levers;
  if (!config.zero.split_vocab)
    levers.push_back({"zero.split_vocab=true", [](config::Config& c) { c.zero.split_vocab = true; }});
  if (config.zero.reduce_dtype == config::ReduceDtype::kFp32 && config.train.precision != config::Precision::kFp32)
    levers.push_back({"zero.reduce_dtype=compute", [](config::Config& c) { c.zero.reduce_dtype = config::ReduceDtype::kCompute; }});
  config::Config all = config;
  for (const auto& [key, set] : levers) {
    config::Config c = config;
    set(c), set(all);
    if (plan_memory(c, world, threads, capacity, device, lengths).fits()) return out.push_back(cat(key, " (ZeRO's transient buffers)"));
  }
  if (levers.size() > 1 && plan_memory(all, world, threads, capacity, device, lengths).fits())
    out.push_back(cat(levers[0].first, " ", levers[1].first, " (ZeRO's transient buffers)"));
}
}  // namespace

// A generation engine's KV cache grows with its slots: the most slots that fit (the rollouts' rl.slots, the
// answer evaluation's log.eval_slots), halving from the configured count.
void add_generation_fixes(const config::Config& config, std::int64_t world, int threads, std::uint64_t capacity,
                          config::Device device, const GenerationLengths& lengths, std::vector<std::string>& out) {
  config::Config c = config;
  if (config.rl.enabled())
    for (c.rl.slots = config.rl.slots / 2; c.rl.slots >= 1; c.rl.slots /= 2)
      if (plan_memory(c, world, threads, capacity, device, lengths).fits())
        return out.push_back(cat("rl.slots=", c.rl.slots, " (the rollouts' KV cache holds that many sequences)"));
  if (!config.log.eval_prompts.empty())
    for (c.log.eval_slots = config.log.eval_slots / 2; c.log.eval_slots >= 1; c.log.eval_slots /= 2)
      if (plan_memory(c, world, threads, capacity, device, lengths).fits())
        return out.push_back(cat("log.eval_slots=", c.log.eval_slots,
                                 " (the answer evaluation's KV cache holds that many sequences)"));
}

std::vector<std::string> suggestions(const config::Config& config, std::int64_t world, int threads, std::uint64_t capacity,
                                     config::Device device, GenerationLengths lengths) {
  std::vector<std::string> out;
  config::Config c = config;
  // For this stage and each higher one: the largest micro-batch that fits (gradient accumulation keeps
  // train.global_batch).
  for (std::int64_t s = config.train.zero_stage; s <= 3; ++s) {
    c.train.zero_stage = s;
    for (std::int64_t m = config.train.micro_batch; m >= 1; --m) {
      c.train.micro_batch = m;
      if (!plan_memory(c, world, threads, capacity, device, lengths).fits()) continue;
      out.push_back(cat("train.zero_stage=", s, " with train.micro_batch=", m,
                        m == config.train.micro_batch ? "" : " (the largest that fits at this stage)"));
      break;
    }
  }
  c = config;
  c.train.zero_stage = std::max<std::int64_t>(1, config.train.zero_stage);
  for (std::int64_t w = world * 2; w <= world * 64; w *= 2)
    if (plan_memory(c, w, threads, capacity, device, lengths).fits()) {
      out.push_back(cat(w, " ranks at train.zero_stage=", c.train.zero_stage, " (sharded state shrinks with the world)"));
      break;
    }
  add_zero_buffer_fixes(config, world, threads, capacity, device, lengths, out);
  add_recompute_fixes(config, world, threads, capacity, device, lengths, out);
  add_offload_fixes(config, world, threads, capacity, device, lengths, out);
  add_generation_fixes(config, world, threads, capacity, device, lengths, out);
  if (out.empty())
    out.push_back("nothing up to ZeRO-3, micro_batch 1, full recompute and 64x the ranks fits: use a smaller model");
  return out;
}

std::string format_plan(const MemoryPlan& p, const std::vector<std::string>& fixes) {
  std::ostringstream out;
  out << "memory plan per rank (" << p.world_size << " rank(s)"
      << (p.tp > 1 ? cat(" = parallel.tp ", p.tp, " x ", p.world_size / p.tp, " data-parallel") : "")
      << (p.pp > 1 ? cat(" = parallel.pp ", p.pp, " x ", p.world_size / p.pp / p.tp, " data-parallel", p.tp > 1 ? cat(" x tp ", p.tp) : "")
                   : "")
      << ", ZeRO stage "
      << p.zero_stage << ", micro_batch " << p.micro_batch << "):\n";
  for (const PlanRow& r : p.rows) {
    char line[64];  // the note goes after it whole, however long
    std::snprintf(line, sizeof line, "  %-22s %12s  ", r.what.c_str(), mib(r.bytes).c_str());
    out << line << r.note << "\n";
  }
  std::uint64_t generation = 0;
  for (const PlanRow& r : p.rows) generation += r.phase == Phase::kGeneration ? r.bytes : 0;
  if (generation > 0)
    out << "  (the generation engine's rows, " << mib(generation) << ", and an optimizer step's transient buffers "
        << "(the actor's, a critic's) are never held together: the total counts the largest)\n";
  char total[160];
  std::snprintf(total, sizeof total, "  %-22s %12s  of %s available per rank: %s\n", "total (predicted peak)",
                mib(p.total_bytes).c_str(), p.capacity_bytes ? mib(p.capacity_bytes).c_str() : "?",
                p.device_fits() ? "fits" : "DOES NOT FIT");
  out << total;
  if (!p.offload_rows.empty()) {
    out << "  off the device, not in the total (train.offload):\n";
    for (const PlanRow& r : p.offload_rows) {
      char line[64];
      std::snprintf(line, sizeof line, "  %-22s %12s  ", r.what.c_str(), mib(r.bytes).c_str());
      out << line << r.note << "\n";
    }
    if (p.host_is_device)
      out << "  host memory: the CPU backend's device, so the total plus " << mib(p.host_bytes) << " must fit its "
          << (p.capacity_bytes ? mib(p.capacity_bytes) : std::string("?")) << "\n";
    else if (p.host_capacity_bytes == 0)
      out << "  host memory per rank: " << mib(p.host_bytes) << " (set plan.host_memory_gb, a node's, to check it)\n";
    else
      out << "  host memory per rank: " << mib(p.host_bytes) << " of " << mib(p.host_capacity_bytes) << ": "
          << (p.host_fits() ? "fits" : "DOES NOT FIT (offload.to=nvme keeps the state on disk)") << "\n";
  }
  if (p.pp > 1) {
    out << "  pipeline: " << (p.vpp > 1 ? "rank " : "stage ") << p.busiest_stage << " is the busiest (the rows above): " << p.busiest_note
        << "; each " << (p.vpp > 1 ? "rank" : "stage") << ":";
    for (std::size_t r = 0; r < p.stage_total_bytes.size(); ++r)
      out << (r ? ", " : " ") << r << " " << mib(p.stage_total_bytes[r]) << " (activations "
          << mib(p.stage_activation_bytes[r]) << ")";
    out << "\n";
  }
  if (!p.fits())
    for (const std::string& f : fixes) out << "  would fit with: " << f << "\n";
  return out.str();
}

std::uint64_t host_memory_per_rank(int ranks_on_node) {
  std::ifstream meminfo("/proc/meminfo");
  unsigned long long kib = 0;
  for (std::string line; std::getline(meminfo, line);)
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) break;
  return kib * 1024 / static_cast<std::uint64_t>(std::max(1, ranks_on_node));
}

}  // namespace zt::plan
