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

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "ckpt/writer.hpp"
#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/error.hpp"
#include "gen/engine.hpp"
#include "model/model.hpp"
#include "model/nf4_params.hpp"
#include "model/pipeline_schedule.hpp"
#include "model/stage_split.hpp"
#include "model/tp_split.hpp"
#include "optim/zero/model_adapters.hpp"
#include "optim/zero/offload.hpp"
#include "plan/plan_rows.hpp"

namespace zt::plan {

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
  const std::int64_t pp = c.parallel.pp, dp = data_parallel_ranks(c, world_size);
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


// The rows of one rank that holds `table` (the whole model, a TP shard or a pipeline rank's stages)
// and `activations` bytes of them, its model state ZeRO-sharded over `dp` ranks; with LoRA, `table` is
// its frozen base and `adapters` what trains.
MemoryPlan rank_plan(const config::Config& config, const model::ParamTable& table,
                     const std::optional<model::ParamTable>& adapters, std::int64_t world_size, std::int64_t dp,
                     std::uint64_t activations, const std::string& activations_note, int threads,
                     std::uint64_t capacity, config::Device device, GenerationLengths lengths = {}, int models = 1) {
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
                    config.lora.base_dtype == config::LoraBaseDtype::kNf4 ? std::optional(model::nf4_store_options(config))
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
  // data.document_mask's segment starts and data.reset_positions' positions: a [micro_batch, seq_len] i32
  // array each on the backend, per model (a pipeline rank's in-flight ones each hold their own).
  if (const int views = (config.data.document_mask ? 1 : 0) + (config.data.reset_positions ? 1 : 0); views > 0)
    p.rows.push_back({"document views", static_cast<std::uint64_t>(views) * models * micro * shape.seq_len * sizeof(std::int32_t),
                      cat(config.data.reset_positions ? "segment starts and positions" : "segment starts",
                          ", i32 per token", models > 1 ? cat(", x ", models, " models in flight") : "")});
  std::uint64_t engine_workspace = 0;  // the CPU scratch of a generation engine's passes
  if (config.rl.enabled())
    engine_workspace = add_rollouts(p, config, table, adapters, dp, tp, compute, lengths.rollouts, lengths.rollout_prompt, device);
  if (!config.log.eval_prompts.empty())  // the answer evaluation at log.eval_every, between steps
    engine_workspace = std::max(engine_workspace, add_generation(p, config, table, adapters, tp, compute,
                   gen::evaluation_engine(gen::dealt_slots(config.log.eval_slots, lengths.evaluation_prompts,
                                                                config.log.eval_samples, dp),
                                          generation_len(config, lengths.evaluation), compute, lengths.evaluation_prompt),
                   "evaluation",
                   lengths.evaluation > 0 ? "the longest prompt + log.eval_max_new_tokens" : "", device));
  if (config.rl.enabled() && config.rl.algorithm == config::RlAlgorithm::kPpo) add_critic(p, config, dp, tp, compute);
  if (device == config::Device::kCuda)
    p.rows.push_back({"workspace", cuda_workspace_bytes(shape, micro), "cuBLASLt workspace, attention backward scratch"});
  else  // one scratch buffer, grown to the largest op's need: a step's or a generation engine's pass
    p.rows.push_back({"workspace",
                      std::max<std::uint64_t>(model::cpu_workspace_bytes(shape, micro, tp, threads, compute, config.train.loss_chunk),
                                              engine_workspace),
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
  const auto whole = whole_table(shape);
  const model::ParamTable& global = *whole;
  const std::int64_t dp = data_parallel_ranks(config, world_size);
  const std::int64_t m = pipeline_micro_batches(config, world_size);
  MemoryPlan busiest;
  std::vector<std::uint64_t> totals, activations;
  for (int r = 0; r < pp; ++r) {
    std::uint64_t acts = 0;
    int models = 0;
    std::string sets;
    for (const StageActivations& a : rank_activations(config, cut, world_size, r)) {
      acts += static_cast<std::uint64_t>(a.in_flight) * a.bytes;
      models += a.in_flight;
      sets += cat(sets.empty() ? "" : " + ", a.in_flight, " x ", mib(a.bytes));
    }
    const std::string note = cat(sets, " in flight (of ", m, " micro-batches of ", config.train.micro_batch, " x ",
                                 shape.seq_len, " tokens), ", dtype_name(model::compute_dtype(config.train.precision)),
                                 ", recompute=", config::to_string(config.train.recompute));
    const model::ParamTable table = model::part_table(global, cut, r, static_cast<int>(config.parallel.tp));
    MemoryPlan p = rank_plan(config, table, rank_adapters(config, cut, r), world_size, dp, acts, note, threads, capacity,
                             device, {}, models);
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
  const auto whole = whole_table(shape);
  const model::ParamTable& global = *whole;
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

namespace {
// The elements of the table's largest unit (the embedding, for most vocabularies).
std::uint64_t largest_unit(const model::ParamTable& table) {
  std::uint64_t largest = 0;
  for (const auto& u : table.units()) largest = std::max<std::uint64_t>(largest, u.numel);
  return largest;
}

// The elements of the table's largest NF4 weight (0: none).
std::uint64_t largest_nf4_weight(const model::ParamTable& table) {
  std::uint64_t largest = 0;
  for (std::size_t p = 0; p < table.params().size(); ++p)
    if (model::nf4_quantized(table, p)) largest = std::max<std::uint64_t>(largest, table.params()[p].numel);
  return largest;
}

// What loading holds on the host beside the allocated state, before step 1. The weights are read range
// by range (model::SafetensorsReader, or the seed's init by range) into the engine a unit at a time
// (ZeroEngine::load_params: the unit's fp32 values, this rank's slice of it at ZeRO-3) with the
// stored bytes of the tensor being read: about 1.5 x the largest unit in fp32; an NF4 base quantizes a
// unit at a time, beside a dequantized tensor and its codes: about 2 x; a tensor-parallel NF4 base also
// holds one whole weight in fp32 and its quantization's round trip (train/lora_base.cpp
// whole_tensors_quantized): 2 x the largest NF4 weight; a LoRA base also hashes the whole base in 16 MiB
// blocks. Measured on the CPU (outside sweep 26's 4-layer Llama, 244.5 MiB of weights, its largest unit
// the 98 MiB embedding): full fine-tuning from a directory 1357 MiB against 1292 + 147 planned, LoRA 342
// against 318 + 163, QLoRA 370 against 307 + 212 (before: 1546, 569 and 745, every rank holding the whole
// model in fp32, the NF4 base twice). The plan's held rows are all allocated by then; not all are, so it
// errs high.
std::uint64_t load_bytes(const config::Config& config, std::int64_t world_size) {
  const auto whole = whole_table(model::model_shape(config.model));
  const bool lora = config.lora.rank > 0, nf4 = lora && config.lora.base_dtype == config::LoraBaseDtype::kNf4;
  std::uint64_t largest = largest_unit(*whole);
  const std::int64_t dp = data_parallel_ranks(config, world_size);
  // ZeRO-3: an engine loads its slice of each unit; an NF4 store builds the whole unit's bytes, then keeps its slice.
  if (config.train.zero_stage == 3 && !nf4) largest = (largest + dp - 1) / dp;
  const std::uint64_t hash_block = lora ? std::min<std::uint64_t>(whole->numel(), 1u << 22) * sizeof(float) : 0;
  const std::uint64_t whole_weight = nf4 && config.parallel.tp > 1 ? 2 * largest_nf4_weight(*whole) * sizeof(float) : 0;
  return static_cast<std::uint64_t>(static_cast<double>(largest * sizeof(float)) * (nf4 ? 2.0 : 1.5)) + hash_block +
         whole_weight;
}

// What a run trains, reduces and checkpoints: the model, or a LoRA run's adapters (its base is frozen).
std::shared_ptr<const model::ParamTable> trained_table(const config::Config& config) {
  const model::GptShape shape = model::model_shape(config.model);
  if (config.lora.rank > 0) return std::make_shared<const model::ParamTable>(model::lora_table(shape, model::lora_spec(config)));
  return whole_table(shape);
}

// The fp32 elements a synchronous save's model.h5 holds at once on rank 0 (train/checkpointer.cpp
// UnitGather): the engine unit being written, and a parameter that spans units assembled (the pieces of
// zero.split_vocab's embedding). A LoRA run's engine holds its adapters' units.
std::uint64_t streamed_model_elements(const config::Config& config, const model::ParamTable& saved) {
  if (config.lora.rank > 0) return largest_unit(saved);
  const optim::EngineUnits units = optim::decoder_engine_units(config, saved, 0);
  std::uint64_t unit = 0, spanning = 0;
  for (const FlatRange& r : units.ranges) unit = std::max<std::uint64_t>(unit, static_cast<std::uint64_t>(r.numel));
  for (const model::ParamInfo& p : saved.params()) {
    const FlatRange param{static_cast<std::int64_t>(p.offset), static_cast<std::int64_t>(p.numel)};
    const auto overlapping = std::count_if(units.ranges.begin(), units.ranges.end(),
                                           [&](const FlatRange& r) { return intersect(r, param).numel > 0; });
    if (overlapping > 1) spanning = std::max<std::uint64_t>(spanning, p.numel);
  }
  return unit + spanning;
}

// What saving a checkpoint holds on rank 0's host beside a step's peak (train/checkpointer.cpp; the
// allocator keeps what the step freed, and an asynchronous write runs during the next step). Synchronous:
// the state is read from the engine slice by slice and model.h5 written from units gathered one at a time
// (streamed_model_elements); with tensor or pipeline parallelism a global unit at a time, assembled on rank
// 0 from the parts' slices of it (train/model_gather.hpp: the unit, its own slice and one received, and the
// local engine unit it reads its slice from). Asynchronous (ckpt.async, without train.offload, which saves
// synchronously): also the rank's shard of the master and both moments (12 bytes a parameter) and rank 0's
// whole fp32 model (with TP/PP, placing each part as it arrives: its own part and one received beside it),
// copied before the write goes on in the background. A LoRA run saves its adapters only. Measured (BENCHMARKS.md, tools/bench/ckpt/save_memory.sh:
// outside sweep 38's 58.8M Llama on the CPU, synchronous): a ZeRO-0 save's peak 1903 -> 1132 MiB, ZeRO-3's
// 1435 / 1425 -> 1004 / 930 MiB on 2 ranks when the shard state and the model stopped being copied whole onto
// every rank (seventeenth session).
std::uint64_t save_bytes(const config::Config& config, std::int64_t world_size) {
  const std::shared_ptr<const model::ParamTable> saved = trained_table(config);
  const std::uint64_t model = saved->numel() * sizeof(float);
  const auto parts = static_cast<std::uint64_t>(config.parallel.tp * config.parallel.pp);
  const bool gathered_parts = parts > 1;
  const bool async = config.ckpt.async && config.train.offload == config::Offload::kNone;
  const auto dp = static_cast<std::uint64_t>(data_parallel_ranks(config, world_size));
  std::uint64_t bytes = 0;
  if (async) {
    bytes = 3 * model / parts / dp + (gathered_parts ? model + 2 * (model / parts) : model);
  } else {  // the state streamed a slice at a time, HDF5's chunk and its filtered copy (4 MiB each), and
            // the C library's heap that these buffers leave resident, up to as much again and at most 48 MiB
            // (outside sweep 40 NEW-2: 35-50 MiB above the buffers on one rank, a 58.8M Llama and an 80 MiB one)
    const std::uint64_t unit = largest_unit(*saved) * sizeof(float), tp = static_cast<std::uint64_t>(config.parallel.tp);
    bytes = gathered_parts ? unit + 3 * (unit / tp) : streamed_model_elements(config, *saved) * sizeof(float);
    bytes += std::min<std::uint64_t>(ckpt::kStreamedSliceBytes, model / parts / dp) + (std::uint64_t{8} << 20);
    bytes += std::min<std::uint64_t>(bytes, std::uint64_t{48} << 20);
  }
  // A unit gathered in fp32 on the device where the master is sharded (ZeRO-3, or mixed precision at 1-2):
  // the engine's transient beside the host copy (on the CPU backend, the host's).
  const bool mixed = config.train.precision != config::Precision::kFp32;
  if (config.lora.rank == 0 && (config.train.zero_stage == 3 || (mixed && config.train.zero_stage >= 1)))
    bytes += largest_unit(*saved) / parts * sizeof(float);
  if (async && config.rl.enabled() && config.rl.algorithm == config::RlAlgorithm::kPpo) bytes *= 2;  // the critic's too
  return bytes;
}

// On the CPU backend, outside the allocator during a step (MemoryPlan::outside_bytes): 72 MiB of BLAS, Open
// MPI and library buffers (a rank's RSS above the plan without reductions: 35-54 MiB on one rank, 64.5 in a
// 2-stage pipeline), and where gradients are
// reduced (more than one data-parallel rank, or ZeRO 2-3's reduce-scatter even on one) Open MPI's scratch
// for its non-blocking collectives, which copy what they reduce, and the heap they leave behind. Upper
// bounds fitted per stage on measurements (the seventeenth and eighteenth sessions, outside sweep 38 F2:
// a tied GPT-2 of 29 MiB of gradients, untied Llamas of 73 and 224 MiB, 1-8 ranks, ZeRO 0-3, without
// Open MPI's single-copy mechanism): at ZeRO-0 every bucket of the last backward is in flight at once (the
// engine waits for them at its end): 0.4-1.04 x all the gradients; at ZeRO-1 every unit's reduce-scatter:
// 0.5-0.85 x on 2 ranks, 1.7-2.0 x on 4, 2.1-2.2 x on 8; at ZeRO 2-3, though two units at a time are in
// flight, the heap their scratch leaves grows to 1.2-1.65 x all and up to 4.8 x the largest unit or the bucket
// (0.7 x on one rank). A LoRA run reduces its adapters' gradients only (outside sweep 27), but at ZeRO-3
// gathers its frozen base every micro-batch (on one rank too): up to half the base's largest unit measured above the libraries
// (outside sweep 42 G2: 28-30 MiB for a 64 MiB embedding on 2 ranks, plain, NF4 or offloaded), counted as the
// whole unit. A tied pipeline also sums the embedding's gradient between its first and last stages every step
// (1.3 x the unit measured).
std::uint64_t cpu_outside_bytes(const config::Config& config, std::int64_t world_size) {
  constexpr std::uint64_t kLibraries = 72ull << 20;
  const std::int64_t dp = data_parallel_ranks(config, world_size);
  const int stage = static_cast<int>(config.train.zero_stage);
  const std::shared_ptr<const model::ParamTable> trained = trained_table(config);
  const auto tp = static_cast<std::uint64_t>(config.parallel.tp);
  const double largest = static_cast<double>(largest_unit(*trained) * sizeof(float) / tp);
  double scratch = 0;
  if (config.lora.rank > 0 && stage == 3)
    scratch += static_cast<double>(largest_unit(*whole_table(trained->shape())) * sizeof(float) / tp);
  if (config.parallel.pp > 1 && config.lora.rank == 0 && trained->shape().tie_embeddings)  // unit 0: the embedding
    scratch += 1.3 * static_cast<double>(trained->units().front().numel * sizeof(float) / tp);
  if (dp > 1 || stage >= 2) {
    // What is reduced: the trained parameters' gradients (a LoRA run's adapters', not its frozen base's).
    const double all = static_cast<double>(trained->numel() * sizeof(float) / tp);
    const double bucket = std::max(largest, config.zero.bucket_mb * (1 << 20));
    if (stage == 0) scratch += 1.2 * all;
    else if (stage == 1) scratch += std::min(0.6 * static_cast<double>(dp), 2.5) * all;
    else scratch += dp == 1 ? std::min(all, bucket) : std::min(2.0 * all, 5.5 * bucket);
  }
  return kLibraries + static_cast<std::uint64_t>(scratch);
}
}  // namespace

MemoryPlan plan_memory(const config::Config& config, std::int64_t world_size, int threads, std::uint64_t capacity,
                       config::Device device, GenerationLengths lengths) {
  MemoryPlan p = device_plan(config, world_size, threads, capacity, device, lengths);
  p.load_bytes = load_bytes(config, world_size);
  p.save_bytes = save_bytes(config, world_size);
  for (const PlanRow& r : p.rows)
    if (r.phase == Phase::kHeld) p.held_bytes += r.bytes;
  p.host_is_device = device == config::Device::kCpu;
  if (p.host_is_device) p.outside_bytes = cpu_outside_bytes(config, world_size);
  const std::int64_t ranks_per_node = std::max<std::int64_t>(1, std::min(world_size, config.plan.gpus_per_node));
  if (!p.host_is_device && config.plan.host_memory_gb > 0)
    p.host_capacity_bytes = static_cast<std::uint64_t>(config.plan.host_memory_gb * (1ull << 30)) / ranks_per_node;
  return p;
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
  // "fits" only where the fit test passes: on the CPU backend the allocator's total may fit while the
  // peaks below (outside the allocator, loading, a save: device_peak) do not (outside sweep 38 F6).
  const bool total_fits = p.total_bytes + (p.host_is_device ? p.host_bytes : 0) <= p.capacity_bytes;
  char total[200];
  std::snprintf(total, sizeof total, "  %-22s %12s  of %s available per rank: %s\n", "total (predicted peak)",
                mib(p.total_bytes).c_str(), p.capacity_bytes ? mib(p.capacity_bytes).c_str() : "?",
                p.capacity_bytes == 0 ? "capacity unknown"
                : !total_fits         ? "DOES NOT FIT"
                : p.device_fits()     ? "fits"
                                      : "DOES NOT FIT with what the rank holds beside it (below)");
  out << total;
  if (p.outside_bytes > 0)  // the CPU backend's: the device is the host
    out << "  outside the allocator: " << mib(p.outside_bytes) << " (BLAS and library buffers"
        << (p.outside_bytes > (72ull << 20) ? ", Open MPI's scratch for the collectives" : "") << "): a step's peak "
        << mib(p.total_bytes + p.outside_bytes)
        << (p.capacity_bytes == 0 ? "" : p.total_bytes + p.outside_bytes + p.host_bytes <= p.capacity_bytes ? ": fits" : ": DOES NOT FIT")
        << "\n";
  if (p.load_bytes > 0) {  // before step 1, not the allocator's
    const char* fix = "; fewer ranks a host, or more memory";
    const std::string what = cat("loading's host staging, ", mib(p.load_bytes), " (the unit being read)");
    if (p.host_is_device)
      out << "  loading (before step 1): the held rows, " << mib(p.held_bytes) << ", plus " << what
          << (p.host_bytes ? cat(", plus the offloaded state, ", mib(p.host_bytes)) : "") << ": "
          << mib(p.held_bytes + p.load_bytes + p.host_bytes)
          << (p.capacity_bytes == 0 ? "" : p.held_bytes + p.load_bytes + p.host_bytes <= p.capacity_bytes ? ": fits" : cat(": DOES NOT FIT", fix))
          << "\n";
    else
      out << "  host memory while loading (before step 1): " << what
          << (p.host_bytes ? cat(", plus the offloaded state, ", mib(p.host_bytes)) : "")
          << (p.host_capacity_bytes == 0 ? " per rank (set plan.host_memory_gb, a node's, to check it)"
                                         : cat(" of ", mib(p.host_capacity_bytes), " per rank: ",
                                               p.host_bytes + p.load_bytes <= p.host_capacity_bytes ? "fits" : cat("DOES NOT FIT", fix)))
          << "\n";
  }
  if (p.save_bytes > 0) {  // between steps, on rank 0's host
    const std::string what = cat("a checkpoint save's host buffers, ", mib(p.save_bytes),
                                 p.host_bytes ? cat(", plus the offloaded state, ", mib(p.host_bytes)) : "");
    const std::uint64_t peak = p.total_bytes + p.outside_bytes + p.save_bytes + p.host_bytes;
    if (p.host_is_device)
      out << "  saving a checkpoint (rank 0): a step's peak, " << mib(p.total_bytes + p.outside_bytes) << ", plus " << what
          << ": " << mib(peak) << (p.capacity_bytes == 0 ? "" : peak <= p.capacity_bytes ? ": fits" : ": DOES NOT FIT") << "\n";
    else
      out << "  host memory while saving (rank 0): " << what
          << (p.host_capacity_bytes == 0 ? " (set plan.host_memory_gb, a node's, to check it)"
                                         : cat(" of ", mib(p.host_capacity_bytes), " per rank: ",
                                               p.host_bytes + p.save_bytes <= p.host_capacity_bytes ? "fits" : "DOES NOT FIT"))
          << "\n";
  }
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