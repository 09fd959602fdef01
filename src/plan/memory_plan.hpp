// The memory planner: predicted bytes per rank for a configuration on a world size and device,
// computed from the same size functions the run uses (parameter table, ZeRO partition, the model's
// activation layout), allocating nothing, so it plans a 7B model on 64 ranks from a laptop.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/from_config.hpp"
#include "model/model.hpp"

namespace zt::plan {

// When a row's bytes are allocated. Generation (an RL iteration's rollouts, or the answer evaluation at
// log.eval_every: their engine and the weights gathered for it, freed after) and an optimizer step's
// transient buffers (ZeRO 2-3's: the actor's, or PPO's critic's, which steps before the actor) never
// coexist, nor RL's ZeRO-3 reference gathering its units for its own pass, so the peak is the held rows
// plus the largest phase.
enum class Phase { kHeld, kGeneration, kUpdate, kCriticUpdate, kReference };

struct PlanRow {
  std::string what;    // "parameters", "gradients", ...
  std::uint64_t bytes; // per rank
  std::string note;    // how it was counted
  Phase phase = Phase::kHeld;
};

struct MemoryPlan {
  std::vector<PlanRow> rows;
  std::uint64_t total_bytes = 0;      // predicted peak of the backend allocator on one rank (peak_of(rows))
  // ZeRO-Offload's state off the device (host memory, an NVMe file, its traffic per step): not in total_bytes.
  std::vector<PlanRow> offload_rows;
  std::uint64_t nvme_bytes = 0;       // offload.to=nvme: this rank's files (its model's and a PPO critic's)
  std::uint64_t host_bytes = 0;       // the offload rows' host memory (state or NVMe buffers)
  std::uint64_t capacity_bytes = 0;   // what one rank may use (0 = unknown)
  // Loading, before step 1: the host staging of the weights being read (init.from, the seed's init; a
  // unit at a time, and for a tensor-parallel NF4 base one whole weight), beside what is already
  // allocated (held_bytes: the held rows). On the CPU backend that is the device; on GPUs host memory.
  // Not the allocator's: not in total_bytes.
  std::uint64_t load_bytes = 0;
  // Saving a checkpoint: rank 0's host buffers (memory_plan.cpp save_bytes: a unit at a time when
  // synchronous; the state's and the model's copies when ckpt.async), beside a step's peak: the allocator
  // keeps what a step freed, and an asynchronous write goes on during the next step.
  std::uint64_t save_bytes = 0;
  // On the CPU backend, what the rank holds outside the backend's allocator during a step: the MPI
  // library's scratch for the gradient collectives (Open MPI's non-blocking reductions copy their buffers)
  // and the BLAS and libraries' own buffers. Not in total_bytes (the allocator's peak); in device_peak.
  std::uint64_t outside_bytes = 0;
  std::uint64_t held_bytes = 0;
  // Host memory one rank may use for host_bytes: on the CPU backend the device is the host (the
  // offload rows share capacity_bytes); on GPUs plan.host_memory_gb over the node's ranks (0 = unknown).
  bool host_is_device = false;
  std::uint64_t host_capacity_bytes = 0;
  std::int64_t world_size = 1, zero_stage = 0, micro_batch = 1;
  std::int64_t tp = 1;                // parallel.tp: the model state is the TP shard's, sharded over world/tp
  // parallel.pp > 1: the rows are the busiest pipeline rank's (the most bytes; the lowest on a tie).
  std::int64_t pp = 1, vpp = 1;
  int busiest_stage = 0;
  std::string busiest_note;                            // its chunks: "embedding + blocks 0-7"
  std::vector<std::uint64_t> stage_total_bytes;        // every pipeline rank's total, in rank order
  std::vector<std::uint64_t> stage_activation_bytes;   // and its activations row
  // The rank's peak on the device: the step's (total_bytes), or on the CPU backend while loading, or a step's
  // with a checkpoint's save.
  std::uint64_t device_peak() const {
    if (!host_is_device) return total_bytes;
    return std::max(total_bytes + outside_bytes + save_bytes, held_bytes + load_bytes) + host_bytes;
  }
  bool device_fits() const { return capacity_bytes == 0 || device_peak() <= capacity_bytes; }
  // On the CPU backend, whether loading (before step 1), not a step with a save, sets device_peak.
  bool loading_is_peak() const {
    return host_is_device && held_bytes + load_bytes > total_bytes + outside_bytes + save_bytes;
  }
  bool host_fits() const {
    return host_is_device || host_capacity_bytes == 0 || host_bytes + std::max(load_bytes, save_bytes) <= host_capacity_bytes;
  }
  bool fits() const { return device_fits() && host_fits(); }
  // Only loading does not fit: no layout of the step is the fix (fewer ranks a host, or more memory).
  bool only_loading_does_not_fit() const {
    MemoryPlan without = *this;
    without.load_bytes = 0;
    return !fits() && without.fits();
  }
};

// The held rows plus the largest phase's (Phase).
std::uint64_t peak_of(const std::vector<PlanRow>& rows);

// Predicts one rank's peak for `config` on `world_size` ranks with `threads` CPU threads per rank, on
// `device` (resolved: cpu or cuda; the backends' workspaces differ). Generation (RL's rollouts, the
// answer evaluation's): sequences of `lengths` tokens where the prompts are known (the longest + the new
// tokens: the trainer's own prediction), else of model.seq_len, their bound (--plan reads no prompts).
struct GenerationLengths {
  std::int64_t rollouts = 0, evaluation = 0;  // tokens a sequence; 0: unknown, model.seq_len bounds it
  std::int64_t evaluation_prompts = 0;        // log.eval_prompts' count (its slots); 0: unknown
  std::int64_t rollout_prompt = 0, evaluation_prompt = 0;  // the longest prompt (the prefill chunk); 0: unknown
};
MemoryPlan plan_memory(const config::Config& config, std::int64_t world_size, int threads,
                       std::uint64_t capacity_bytes, config::Device device = config::Device::kCpu,
                       GenerationLengths lengths = {});

// What would make a plan that does not fit fit: the largest micro-batch, other ZeRO stages, more ranks,
// full recomputation, and the cheapest offload tier that fits (host memory before NVMe).
// ranks_on_host: where capacity_bytes is a host's memory shared by that many ranks (CPU ranks), more
// ranks are planned with the host's memory over as many of them as one host takes (plan.gpus_per_node,
// as --plan --plan.world_size plans them); 0: capacity_bytes is each rank's whatever the world (a GPU's).
std::vector<std::string> suggestions(const config::Config& config, std::int64_t world_size, int threads,
                                     std::uint64_t capacity_bytes, config::Device device = config::Device::kCpu,
                                     GenerationLengths lengths = {}, std::int64_t ranks_on_host = 0);

// The CUDA backend's own scratch at this shape: the cuBLASLt workspace (32 MiB) and the flash-attention
// backward's per-row terms D (B*NH*T f32; its dQ pass writes dqkv directly, with no accumulator).
std::uint64_t cuda_workspace_bytes(const model::GptShape& shape, int micro_batch);
// The model's activations for one micro-batch of `shape` (of its pipeline stage `stage`; parallel.tp
// > 1: the whole model's, the tensor-parallel models have no stages) under the config's parallel.tp (and
// sequence parallelism), recompute mode and precision (without LoRA's scratch): plan_memory's
// activations row at parallel.pp = 1.
std::uint64_t activation_bytes(const config::Config& config, const model::GptShape& shape, const model::Stage& stage = {});

// The micro-batches of one pipeline step on world_size ranks: train.global_batch / (micro_batch x
// data-parallel ranks), at least 1, rounded up to whole groups of parallel.pp under the interleaved
// schedule (config::derive refuses a batch that does not split; the planner's suggestions try such).
std::int64_t pipeline_micro_batches(const config::Config& config, std::int64_t world_size);

// One model chunk of a pipeline rank: its blocks, the activation sets the schedule keeps in flight on
// it (the trainer allocates that many) and the bytes of one.
struct StageActivations {
  model::Stage stage;
  int in_flight = 0;
  std::uint64_t bytes = 0;
};
// Pipeline rank `rank`'s chunks under the config's parallel.pp, parallel.vpp and micro-batches.
std::vector<StageActivations> pipeline_activations(const config::Config& config, std::int64_t world_size, int rank);

// The plan as a table (and the suggestions when it does not fit).
std::string format_plan(const MemoryPlan& plan, const std::vector<std::string>& fixes);


// Memory one CPU rank may use: the host's available memory divided by the ranks on the node.
std::uint64_t host_memory_per_rank(int ranks_on_node);

}  // namespace zt::plan
