// The memory plan's suggestions (plan::suggestions): the layouts and keys that make a plan that does not fit
// fit, each tried through plan_memory itself: a larger ZeRO stage or a smaller micro-batch, more ranks,
// ZeRO's buffer keys, full recomputation, tensor or pipeline parallelism on the same ranks, the cheapest
// offload tier, fewer generation slots.
#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/divisors.hpp"
#include "core/error.hpp"
#include "plan/layout_search.hpp"
#include "config/derived.hpp"
#include "config/parse.hpp"
#include "plan/memory_plan.hpp"
#include "plan/plan_rows.hpp"

namespace zt::plan {
namespace {

// Whether the run takes this configuration on `world` ranks of `device` (config::derive's batch and
// schedule rules, what a pipeline runs with, and RL's prompts dealt whole): a suggestion the run would
// then refuse is no fix.
bool accepted(const config::Config& c, std::int64_t world, config::Device device) {
  const std::int64_t model_ranks = c.parallel.tp * c.parallel.pp;
  if (world % model_ranks != 0) return false;
  try {
    config::validate(c);
    config::derive(c, world);
    config::check_pipeline_runs(c, config::uses_nccl(c, device));
  } catch (const ConfigError&) {
    return false;
  }
  return rl_prompts_deal(c, world / model_ranks);
}

// The largest micro-batch from c's down that splits train.global_batch over c's data-parallel ranks and
// with which c fits, left set in c; 0 (c's micro-batch then 1) when none does. Only a micro-batch that
// splits the step's sequences over the ranks can be taken (derive's first rule, cheap to ask first: the
// range reaches 2^24); RL's steps are rl.*'s, asked of accepted(). `with_micro` sets what follows the
// micro-batch (sequence parallelism, where its token rows split over tp).
std::int64_t largest_fitting_micro_batch(config::Config& c, std::int64_t world, int threads, std::uint64_t capacity,
                                         config::Device device, const GenerationLengths& lengths,
                                         const std::function<void(config::Config&)>& with_micro = {}) {
  const std::int64_t model_ranks = c.parallel.tp * c.parallel.pp;
  if (world % model_ranks != 0) return 0;
  const std::int64_t dp = world / model_ranks;
  for (std::int64_t m = c.train.micro_batch; m >= 1; --m) {
    if (!c.rl.enabled() && c.train.global_batch % (m * dp) != 0) continue;
    c.train.micro_batch = m;
    if (with_micro) with_micro(c);
    if (accepted(c, world, device) && plan_memory(c, world, threads, capacity, device, lengths).fits()) return m;
  }
  return 0;
}

// The fewest ranks, 2x to 64x `world`, on which `c` fits: keeping train.global_batch where it splits over
// them, else (not under RL, whose batches are rl.*'s) with the smallest global batch above it that does,
// which the fix then names (it changes the optimizer step). "" when none fits.
// ranks_on_host: suggestions'.
std::string fewest_ranks(const config::Config& c, std::int64_t world, int threads, std::uint64_t capacity,
                         config::Device device, const GenerationLengths& lengths, std::int64_t ranks_on_host) {
  const auto capacity_at = [&](std::int64_t w) {  // a host's memory over the ranks it takes of w (outside sweep 30 F3)
    if (ranks_on_host <= 0) return capacity;
    const std::int64_t sharing = std::max<std::int64_t>(1, std::min(w, c.plan.gpus_per_node));
    return static_cast<std::uint64_t>(static_cast<double>(capacity) * static_cast<double>(ranks_on_host) /
                                      static_cast<double>(sharing));
  };
  const auto fits = [&](const config::Config& k, std::int64_t w) {
    return accepted(k, w, device) && plan_memory(k, w, threads, capacity_at(w), device, lengths).fits();
  };
  for (std::int64_t w = world * 2; w <= world * 64; w *= 2)
    if (fits(c, w)) return cat(w, " ranks");
  if (c.rl.enabled()) return "";
  for (std::int64_t w = world * 2; w <= world * 64; w *= 2) {
    config::Config k = c;
    const std::int64_t split = (w / (c.parallel.tp * c.parallel.pp)) * c.train.micro_batch *
                               (c.parallel.vpp > 1 ? c.parallel.pp : 1);  // sequences one step of w ranks takes at least
    if (split <= 0) continue;
    k.train.global_batch = (c.train.global_batch + split - 1) / split * split;
    if (fits(k, w))
      return cat(w, " ranks and train.global_batch=", k.train.global_batch, " (", c.train.global_batch,
                 " does not split over them)");
  }
  return "";
}

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
    if (!accepted(c, world, device)) return;
    const MemoryPlan p = plan_memory(c, world, threads, capacity, device, lengths);
    if (!p.fits()) continue;
    const char* what = config.lora.rank > 0 ? "the frozen base's shard" : "the optimizer state and the parameters' shard";
    out.push_back(to == config::OffloadTo::kHost
                      ? cat("train.offload=params with train.zero_stage=3 (", what, " in host memory, ", mib(p.host_bytes),
                            " per rank; each unit's slice crosses PCIe at each gather)")
                      : cat("train.offload=params offload.to=nvme offload.nvme_dir=DIR (a node-local disk) with "
                            "train.zero_stage=3: ", mib(p.nvme_bytes), " of files per rank, ", mib(p.host_bytes),
                            " of host buffers; each unit's slice read from the disk at each gather"));
    return;
  }
}

void add_offload_fixes(const config::Config& config, std::int64_t world, int threads, std::uint64_t capacity,
                       config::Device device, const GenerationLengths& lengths, std::vector<std::string>& out) {
  // A LoRA run's optimizer state is its adapters' (small); its frozen bf16/fp32 base is offloaded as
  // parameters at ZeRO-3 (an NF4 base stays on the device: accepted() asks config::validate).
  if (config.lora.rank > 0) return add_param_offload_fix(config, world, threads, capacity, device, lengths, out);
  if (config.train.offload == config::Offload::kParams) return add_param_offload_fix(config, world, threads, capacity, device, lengths, out);
  const bool offloading = config.train.offload == config::Offload::kOptimizer;
  if (offloading && config.offload.to == config::OffloadTo::kNvme)
    return add_param_offload_fix(config, world, threads, capacity, device, lengths, out);
  config::Config c = config;
  c.train.offload = config::Offload::kOptimizer;
  for (std::int64_t s = std::max<std::int64_t>(1, config.train.zero_stage); s <= 3; ++s) {
    c.train.zero_stage = s;
    if (!accepted(c, world, device)) break;
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
// are often the largest row. Its first fitting stage here, at the largest micro-batch that fits there (outside
// sweep 42 G4: it was tried at the configured one only), and the fewest ranks at ZeRO-3 with it.
void add_recompute_fixes(const config::Config& config, std::int64_t world, int threads, std::uint64_t capacity,
                         config::Device device, const GenerationLengths& lengths, std::int64_t ranks_on_host,
                         std::vector<std::string>& out) {
  if (config.train.recompute == config::Recompute::kFull) return;
  config::Config c = config;
  c.train.recompute = config::Recompute::kFull;
  for (std::int64_t s = config.train.zero_stage; s <= 3; ++s) {
    c.train.zero_stage = s;
    c.train.micro_batch = config.train.micro_batch;
    if (const std::int64_t m = largest_fitting_micro_batch(c, world, threads, capacity, device, lengths); m > 0) {
      out.push_back(cat("train.recompute=full with train.zero_stage=", s,
                        m == config.train.micro_batch ? "" : cat(" train.micro_batch=", m)));
      return;
    }
  }
  c.train.micro_batch = config.train.micro_batch;
  // The most sharding the layout runs with: ZeRO-3, or ZeRO-1 under a pipeline (config::check_pipeline_runs).
  c.train.zero_stage = config.parallel.pp > 1 ? std::max<std::int64_t>(1, config.train.zero_stage) : 3;
  if (const std::string ranks = fewest_ranks(c, world, threads, capacity, device, lengths, ranks_on_host); !ranks.empty())
    out.push_back(cat(ranks, " at train.zero_stage=", c.train.zero_stage, " with train.recompute=full"));
}

// Tensor parallelism (with sequence parallelism where a micro-batch's token rows split over tp) and
// pipeline parallelism on the same ranks: they cut the blocks' weights and, at long context, the
// activations that bind there (outside sweep 38 F8). The smallest tp above the configured one that fits,
// and the smallest pp, each at the largest micro-batch that does, with the configured recomputation (else
// full) and ZeRO stage (else another; a pipeline's 0-1: config::check_pipeline_runs). A few dozen plans
// at most: the refusal stays quick.
void add_model_parallel_fixes(const config::Config& config, std::int64_t world, int threads, std::uint64_t capacity,
                              config::Device device, const GenerationLengths& lengths, std::vector<std::string>& out) {
  const auto fitting = [&](config::Config c) -> std::string {  // c: the grid set; "" when nothing fits
    const bool new_cut = c.parallel.pp != config.parallel.pp;
    if (new_cut) c.parallel.pp_layers.clear(), c.parallel.vpp = 1, c.parallel.schedule = config::PipeSchedule::kOneFOneB;
    if (world % (c.parallel.tp * c.parallel.pp) != 0) return "";
    // The configured stage first, then the others (what a stage saves on the host differs too: a smaller
    // stage may fit where ZeRO-3 does not); a pipeline's at most 1.
    std::vector<std::int64_t> stages{c.parallel.pp > 1 ? std::min<std::int64_t>(config.train.zero_stage, 1) : config.train.zero_stage};
    for (std::int64_t s = 0; s <= (c.parallel.pp > 1 ? 1 : 3); ++s)
      if (s != stages.front()) stages.push_back(s);
    std::vector<config::Recompute> recomputes{config.train.recompute};
    if (config.train.recompute != config::Recompute::kFull) recomputes.push_back(config::Recompute::kFull);
    std::vector<std::pair<config::Recompute, std::int64_t>> tries;  // (recompute, ZeRO stage) in order
    for (const config::Recompute rc : recomputes)
      for (const std::int64_t stage : stages)
        if ((config.train.offload == config::Offload::kNone || stage > 0) &&  // offload is ZeRO's sharded state
            (config.train.offload != config::Offload::kParams || stage == 3))
          tries.emplace_back(rc, stage);
    const auto sequence_parallel = [](config::Config& k) {
      k.parallel.sequence_parallel = k.parallel.tp > 1 && (k.train.micro_batch * k.model.seq_len) % k.parallel.tp == 0;
    };
    for (const auto& [rc, stage] : tries) {
      c.train.recompute = rc;
      c.train.zero_stage = stage;
      c.train.micro_batch = config.train.micro_batch;
      const std::int64_t m = largest_fitting_micro_batch(c, world, threads, capacity, device, lengths, sequence_parallel);
      if (m == 0) continue;
      std::string keys;  // what changes, as the keys that run it
      const auto key = [&](bool changed, const std::string& k) { keys += changed ? (keys.empty() ? "" : " ") + k : ""; };
      key(c.parallel.tp != config.parallel.tp, cat("parallel.tp=", c.parallel.tp));
      key(new_cut, cat("parallel.pp=", c.parallel.pp));
      key(new_cut && config.parallel.vpp > 1, "parallel.vpp=1 parallel.schedule=1f1b");
      key(new_cut && !config.parallel.pp_layers.empty(), "parallel.pp_layers=");
      key(c.parallel.sequence_parallel != config.parallel.sequence_parallel,
          cat("parallel.sequence_parallel=", c.parallel.sequence_parallel ? "true" : "false"));
      return cat(keys, " with train.micro_batch=", m, rc != config.train.recompute ? " train.recompute=full" : "",
                 c.train.zero_stage != config.train.zero_stage ? cat(" train.zero_stage=", c.train.zero_stage) : "");
    }
    return "";
  };
  for (const std::int64_t tp : config::tp_degrees(config.model, world / config.parallel.pp)) {
    if (tp <= config.parallel.tp || tp > config.plan.gpus_per_node) continue;  // a TP group stays on one node
    config::Config c = config;
    c.parallel.tp = tp;
    if (std::string fix = fitting(c); !fix.empty()) {
      out.push_back(cat(fix, " (tensor parallelism on these ", world, " ranks: each holds 1/", tp, " of the blocks' weights",
                        fix.find("sequence_parallel=true") != std::string::npos ? " and of their activations" : "", ")"));
      break;
    }
  }
  if (config.train.offload == config::Offload::kParams) return;  // ZeRO-3's; a pipeline pairs with ZeRO 0-1
  for (const std::int64_t pp : divisors(world / config.parallel.tp)) {
    if (pp <= config.parallel.pp || pp > config.model.n_layer) continue;
    config::Config c = config;
    c.parallel.pp = pp;
    if (std::string fix = fitting(c); !fix.empty()) {
      out.push_back(cat(fix, " (pipeline parallelism on these ", world, " ranks: each stage holds its blocks)"));
      break;
    }
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

}  // namespace

std::vector<std::string> suggestions(const config::Config& config, std::int64_t world, int threads, std::uint64_t capacity,
                                     config::Device device, GenerationLengths lengths, std::int64_t ranks_on_host) {
  std::vector<std::string> out;
  config::Config c = config;
  // For this stage and each higher one: the largest micro-batch that fits (gradient accumulation keeps
  // train.global_batch).
  for (std::int64_t s = config.train.zero_stage; s <= 3; ++s) {
    c.train.zero_stage = s;
    c.train.micro_batch = config.train.micro_batch;
    if (const std::int64_t m = largest_fitting_micro_batch(c, world, threads, capacity, device, lengths); m > 0)
      out.push_back(cat("train.zero_stage=", s, " with train.micro_batch=", m,
                        m == config.train.micro_batch ? "" : " (the largest that fits at this stage)"));
  }
  // An asynchronous save copies the shard's state and the whole fp32 model to host memory first; a
  // synchronous one streams them (outside sweep 42 G5: the fix named was optimizer offload, which only
  // fitted because offload makes the save synchronous).
  c = config;
  c.ckpt.async = false;
  if (config.ckpt.async && accepted(c, world, device) && plan_memory(c, world, threads, capacity, device, lengths).fits())
    out.push_back("ckpt.async=false (a synchronous save reads the state slice by slice and writes the model a unit at a "
                  "time: no host copies of them)");
  c = config;
  c.train.zero_stage = std::max<std::int64_t>(1, config.train.zero_stage);
  if (const std::string ranks = fewest_ranks(c, world, threads, capacity, device, lengths, ranks_on_host); !ranks.empty())
    out.push_back(cat(ranks, " at train.zero_stage=", c.train.zero_stage, " (sharded state shrinks with the world)"));
  add_zero_buffer_fixes(config, world, threads, capacity, device, lengths, out);
  add_recompute_fixes(config, world, threads, capacity, device, lengths, ranks_on_host, out);
  add_model_parallel_fixes(config, world, threads, capacity, device, lengths, out);
  add_offload_fixes(config, world, threads, capacity, device, lengths, out);
  add_generation_fixes(config, world, threads, capacity, device, lengths, out);
  // The search tries what these do not (tp x pp grids, offload with either, every micro-batch and recompute
  // mode together): point to it rather than say nothing fits (outside sweep 38 F8).
  if (out.empty())
    out.push_back("no single change: neither ZeRO-3, micro_batch 1, full recompute, tensor or pipeline parallelism, "
                  "offload, nor up to 64x the ranks (with a global batch that splits over them); `ztrain --plan "
                  "--plan.search` ranks every layout of these ranks (tp x pp x dp x micro-batch x recompute x ZeRO x "
                  "offload together); if it finds none, use a smaller model or larger devices");
  return out;
}

}  // namespace zt::plan
