// ztrain: parse -> place ranks -> (print config | pick the checkpoint to resume from, train) -> exit code
// (docs/INTERFACE.md).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "apps/boundary.hpp"
#include "ckpt/dir_lock.hpp"
#include "data/shard_set.hpp"
#include "config/derived.hpp"
#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/log.hpp"
#include "core/version.hpp"
#include "dist/deadline.hpp"
#include "dist/device_info.hpp"
#include "dist/grid.hpp"
#include "dist/placement.hpp"
#include "dist/world.hpp"
#include "health/preflight.hpp"
#include "model/tp_split.hpp"
#include "plan/layout_search.hpp"
#include "plan/memory_plan.hpp"
#include "rl/batch_rules.hpp"
#include "train/attention_check.hpp"
#include "train/data_check.hpp"
#include "train/output_check.hpp"
#include "train/run.hpp"
#include "train/signals.hpp"
#include "train/answer_eval.hpp"
#include "train/prompt_check.hpp"

namespace zt::apps {
namespace {

struct Startup {
  config::CommandLine cl;
  config::Derived derived;
  dist::Placement placement;
  config::Device plan_device = config::Device::kCpu;  // what the memory plan is for
  // --plan --plan.search: why the configured layout does not run on the planned ranks (the search picks
  // the micro-batch and the grid itself, so this is a line of its table, not a refusal).
  std::string configured_refusal;
};

// Places this rank. --plan and --print-config with train.device=cuda speak of GPUs even where none is
// visible (a login node), so there the placement falls back to what is here and only the plan (and
// --print-config's header) speaks of CUDA.
void place(dist::World& world, Startup& s) {
  config::Config c = s.cl.config;
  const bool plan_for_cuda = (s.cl.plan || s.cl.print_config) && c.train.device == config::Device::kCuda;
  if (plan_for_cuda) c.train.device = config::Device::kAuto;
  s.placement = dist::place_rank(world, c, train::cuda_backend_built());
  s.plan_device = plan_for_cuda ? config::Device::kCuda : s.placement.device;
}

// The resolved configuration as INI, preceded by '#' lines with the world layout and derived values.
void print_config(const dist::World& world, const Startup& s) {
  const std::string mine = cat("# rank ", world.rank(), ": host=", world.host(), " local_rank=", world.local_rank(),
                               " local_size=", world.local_size(), " device=", s.placement.device_name(),
                               " threads=", s.placement.threads);
  const std::vector<std::string> ranks = world.gather_to_root(mine, "--print-config: collecting the ranks' layout");
  if (!world.is_root()) return;
  const config::Config& c = s.cl.config;
  const bool gpu_elsewhere = s.plan_device == config::Device::kCuda && s.placement.device != config::Device::kCuda;
  const config::CommBackend comm = gpu_elsewhere ? config::comm_backend(c, config::Device::kCuda) : s.placement.comm;
  std::cout << "# ztrain " << version() << " (git " << git_revision() << "): resolved configuration; loads again with --config\n"
            << "# world_size = " << world.size() << " ("
            << (c.parallel.pp * c.parallel.tp > 1 ? cat("parallel.pp ", c.parallel.pp, " x data-parallel ", s.derived.dp_size,
                                                        " x parallel.tp ", c.parallel.tp)
                                                  : "data-parallel ranks")
            << "), nodes = " << world.n_nodes()
            << ", dist.backend resolved = " << config::to_string(comm) << "\n";
  if (gpu_elsewhere)
    std::cout << "# train.device=cuda: no GPU is visible here, so the ranks below are this host's; the job runs where GPUs are\n";
  for (const std::string& line : ranks) std::cout << line << "\n";
  if (c.rl.enabled())  // RL's batches are rl.*'s: train.global_batch is not read
    std::cout << "# " << rl::describe(rl::layout_of(c, static_cast<int>(s.derived.dp_size))) << "\n\n";
  else
    std::cout << "# grad_accum = " << s.derived.grad_accum << " (train.global_batch " << c.train.global_batch
              << " = micro_batch " << c.train.micro_batch << " x grad_accum " << s.derived.grad_accum << " x ranks "
              << s.derived.dp_size << ")\n"
              << "# tokens_per_step = " << s.derived.tokens_per_step << " (global_batch x seq_len)\n\n";
  std::cout << config::to_ini(c) << std::flush;
}

struct MemoryCheck {
  plan::MemoryPlan plan;
  std::vector<std::string> fixes;
  std::string capacity_from;  // where the capacity came from, for --plan's footer
};

// The memory plan for this run, or for plan.world_size ranks with plan.device_memory_gb each.
MemoryCheck check_memory(const dist::World& world, const Startup& s) {
  const config::Config& c = s.cl.config;
  const std::int64_t ranks = c.plan.world_size > 0 ? c.plan.world_size : world.size();
  std::uint64_t capacity = 0;  // unknown: a GPU plan made where no GPU is
  std::int64_t on_host = 0;    // the ranks sharing a host's memory as capacity (CPU ranks)
  std::string from = "nowhere: no GPU here, set plan.device_memory_gb";
  if (c.plan.device_memory_gb > 0) {
    capacity = static_cast<std::uint64_t>(c.plan.device_memory_gb * (1ull << 30));
    from = "plan.device_memory_gb";
  } else if (s.placement.device == config::Device::kCuda) {
    capacity = dist::cuda_device_memory_bytes(s.placement.device_index);
    from = "the GPU's total memory";
  } else if (s.plan_device == config::Device::kCpu) {
    // plan.world_size ranks on CPUs share hosts as the run's would: this host's memory over as many of
    // them as one host takes (plan.gpus_per_node, at most all of them), not over this one process.
    on_host = c.plan.world_size > 0 ? std::min(c.plan.world_size, c.plan.gpus_per_node) : world.local_size();
    capacity = plan::host_memory_per_rank(static_cast<int>(on_host));
    from = c.plan.world_size > 0 ? cat("this host's available memory over ", on_host, " ranks (plan.world_size, at most ",
                                       "plan.gpus_per_node a host)")
                                 : "this host's available memory";
  }
  if (s.plan_device == config::Device::kCuda && capacity > 0) {  // what lives outside the allocator
    const auto reserve = static_cast<std::uint64_t>(c.plan.reserve_gb * (1ull << 30));
    if (reserve >= capacity)
      throw ConfigError(cat("plan.reserve_gb=", c.plan.reserve_gb, " leaves nothing of the device's ",
                            static_cast<double>(capacity) / (1ull << 30), " GiB: use a smaller plan.reserve_gb"));
    capacity -= reserve;
    from += cat(" less plan.reserve_gb=", c.plan.reserve_gb, " (the CUDA context, NCCL, library handles)");
  }
  const plan::GenerationLengths lengths = train::known_generation_lengths(c);
  MemoryCheck m{plan::plan_memory(c, ranks, s.placement.threads, capacity, s.plan_device, lengths), {}, from};
  if (!m.plan.fits() && !m.plan.only_loading_does_not_fit())
    m.fixes = plan::suggestions(c, ranks, s.placement.threads, capacity, s.plan_device, lengths, on_host);
  return m;
}

// parallel.tp > 1 (issue 20): TP groups must share a node (said before any work, exit 2).
// parallel.pp > 1 (issue 21): what the pipeline does not run yet is refused the same way.
void check_tensor_parallel(const dist::World& world, const config::Config& c, config::Device device) {
  dist::check_tp_groups_share_nodes(dist::Grid::make(world.size(), static_cast<int>(c.parallel.tp), world.rank(),
                                                     static_cast<int>(c.parallel.pp)), world);
  config::check_pipeline_runs(c, config::uses_nccl(c, device));
}

// --plan for plan.world_size ranks elsewhere: the grid rules the run checks on its own ranks (a TP group
// inside a node of plan.gpus_per_node GPUs; what the pipeline runs), so that exit 0 means the job starts.
void check_planned_grid(const config::Config& c, config::Device device) {
  if (device == config::Device::kCuda && c.parallel.tp > c.plan.gpus_per_node)
    throw ConfigError(cat("parallel.tp=", c.parallel.tp, " spans more than a node of plan.gpus_per_node=", c.plan.gpus_per_node,
                          " GPUs: a tensor-parallel group talks every layer and must stay inside one node (the run "
                          "refuses one that crosses); use parallel.tp <= ", c.plan.gpus_per_node,
                          " (with data or pipeline parallelism across nodes), or set plan.gpus_per_node to the nodes' GPUs"));
  config::check_pipeline_runs(c, config::uses_nccl(c, device));
}

// --plan --plan.search: rank 0 prints the layouts ranked by predicted tokens/s; exit 0 if one fits, 2 if none.
int print_search(const dist::World& world, const Startup& s, const MemoryCheck& m) {
  const config::Config c = plan::search_config(s.cl.config);
  const std::int64_t ranks = c.plan.world_size > 0 ? c.plan.world_size : world.size();
  const plan::Machine machine = plan::machine_of(c.plan, ranks, m.plan.capacity_bytes, s.plan_device, s.placement.threads);
  const plan::SearchResult r = plan::search_layouts(c, machine);
  plan::Candidate mine = plan::evaluate(c, plan::configured_layout(c, ranks), machine);
  if (!s.configured_refusal.empty()) {
    mine.rejected = cat("not runnable on ", ranks, " ranks: ", s.configured_refusal);
    mine.out_of_memory = false;
  }
  if (world.is_root())
    std::cout << plan::format_search(c, machine, r, mine) << "  (" << (s.plan_device == config::Device::kCuda ? "CUDA" : "CPU")
              << " backend; memory from the memory plan, capacity from " << m.capacity_from << ")\n";
  return r.ranked.empty() ? kExitUsage : kExitOk;
}

// --plan: rank 0 prints the table; exit 0 if it fits, 2 if not. Needs no data, GPU or launcher.
int print_plan(const dist::World& world, const Startup& s) {
  if (s.cl.config.plan.world_size > 0 && !s.cl.config.plan.search) check_planned_grid(s.cl.config, s.plan_device);
  // A plan needs no weights, but a Hugging Face directory's config.json gives the [model] keys not set: one
  // that is not here leaves them at their defaults, which the plan must say (a login node without the model).
  std::error_code ec;
  const std::string& from = s.cl.config.init.from;
  if (world.is_root() && !from.empty() && !std::filesystem::exists(from, ec))
    log::warn(cat("init.from=", from, " is not here: the plan is of the [model] keys as given, their defaults for ",
                  "the rest, not of that model's config.json (set the model keys, or plan where the model is)"));
  const MemoryCheck m = check_memory(world, s);
  // No GPU here and no plan.device_memory_gb: the table is printed, but "fits" would be a guess (exit 2).
  auto unknown_capacity = [&] {
    return ConfigError(cat("--plan for train.device=cuda where no GPU is visible has no device memory to plan against: ",
                           "set plan.device_memory_gb to the GPUs' memory in GiB (79.6 for an H100 80GB, 140.4 for an H200)"));
  };
  if (s.cl.config.plan.search) {
    if (m.plan.capacity_bytes == 0) throw unknown_capacity();
    return print_search(world, s, m);
  }
  if (world.is_root())
    std::cout << plan::format_plan(m.plan, m.fixes) << "  (" << (s.plan_device == config::Device::kCuda ? "CUDA" : "CPU")
              << " backend, " << config::to_string(s.cl.config.train.precision) << "; capacity from "
              << m.capacity_from << ")\n";
  if (m.plan.capacity_bytes == 0) throw unknown_capacity();
  return m.plan.fits() ? kExitOk : kExitUsage;
}

int run(dist::World& world, int argc, char** argv) {
  train::install_stop_signal_handlers();  // again after MPI_Init (main installed them before it)
  Startup s;
  world.set_timeout(config::Config{}.dist.timeout_s);  // the watchdog's default until the config is read
  const int code = agree_on_startup(world, [&] {
    s.cl = config::parse_command_line(argc, argv);
    if (s.cl.help || s.cl.help_markdown || s.cl.version) return;
    log::set_all_ranks(s.cl.config.log.all_ranks);
    if (s.cl.config.plan.search && !s.cl.plan && !s.cl.print_config)
      throw ConfigError("plan.search=true ranks layouts and exits, it does not train: add --plan (ztrain --plan "
                        "--plan.search ...), or drop plan.search to train");
    place(world, s);
    // --plan for plan.world_size ranks splits the batch (and the grid) over those, not over this world.
    const bool planning_elsewhere = s.cl.plan && s.cl.config.plan.world_size > 0;
    const std::int64_t ranks = planning_elsewhere ? s.cl.config.plan.world_size : world.size();
    if (s.cl.plan && s.cl.config.plan.search) {  // the search splits the batch its own ways: the configured
      try {                                        // layout not splitting it is one line of the table
        s.derived = config::derive(s.cl.config, ranks);
      } catch (const ConfigError& e) {
        s.configured_refusal = e.what();
      }
    } else {
      s.derived = config::derive(s.cl.config, ranks);
    }
    if (s.cl.config.rl.enabled() && !s.cl.config.plan.search)  // --plan too: what RL's batch rules refuse is no plan
      rl::check_batch_layout(rl::layout_of(s.cl.config, static_cast<int>(s.derived.dp_size)));
    const std::int64_t pp = s.cl.config.parallel.pp;  // derive() has checked that pp divides the world
    model::check_tp_degree(model::model_shape(s.cl.config.model), static_cast<int>(s.cl.config.parallel.tp), "parallel.tp",
                           ranks % pp == 0 ? ranks / pp : 0,
                           pp > 1 ? cat("the world's ", ranks, " ranks / parallel.pp=", pp) : cat("the world of ", ranks, " rank(s)"));
    train::check_attention(s.cl.config, s.plan_device);
  }, "parsing the configuration");
  if (code != kExitOk) return code;
  world.set_timeout(s.cl.config.dist.timeout_s);
  if (s.cl.help || s.cl.help_markdown || s.cl.version || s.cl.plan || s.cl.print_config)
    train::restore_default_stop_signals();  // nothing to save: a stop ends it
  if (s.cl.help || s.cl.help_markdown || s.cl.version) {
    if (!world.is_root()) return kExitOk;
    if (s.cl.help) std::cout << config::help_text("ztrain");
    if (s.cl.help_markdown) std::cout << config::reference_markdown();
    if (s.cl.version) std::cout << "ztrain " << version() << " (git " << git_revision() << ")\n";
    return kExitOk;
  }
  const bool grid = s.cl.config.parallel.tp > 1 || s.cl.config.parallel.pp > 1;
  // --plan on these ranks checks the grid as the run would; for plan.world_size ranks print_plan does, and
  // the search ranks layouts of its own.
  const bool grid_here = !s.cl.plan || (s.cl.config.plan.world_size == 0 && !s.cl.config.plan.search);
  if (grid && grid_here)  // its own agreement: the host check is collective
    if (const int tp_code = agree_on_startup(world, [&] { check_tensor_parallel(world, s.cl.config, s.plan_device); },
                                             "checking the tensor- and pipeline-parallel grid");
        tp_code != kExitOk)
      return tp_code;
  if (s.cl.print_config) {
    return run_or_abort(world, [&] {
      print_config(world, s);
      return kExitOk;
    });
  }
  if (s.cl.plan) {  // inside the boundary: a batch that does not split over plan.world_size is exit 2
    int result = kExitOk;
    const int code = agree_on_startup(world, [&] { result = print_plan(world, s); }, "the memory plan");
    return code != kExitOk ? code : result;
  }
  // Where every rank runs (host, device, driver, NCCL, network variables), as one table on rank 0.
  dist::log_rank_table(world, s.placement, config::to_string(s.placement.comm));
  if (s.cl.preflight) {  // where the report goes is checked before minutes of measuring (rank 0 writes it)
    const int out_code = agree_on_startup(world, [&] { if (world.is_root()) health::check_preflight_out(s.cl.config); },
                                          "checking preflight.out");
    if (out_code != kExitOk) return out_code;
    return run_or_abort(world, [&] { return train::run_preflight(world, s.cl.config, s.placement); });
  }
  // A run predicted not to fit stops here, before any work, with the table and the fixes (--force runs it).
  const int fit_code = agree_on_startup(world, [&] {
    const MemoryCheck m = check_memory(world, s);
    if (!m.plan.fits() && !s.cl.force)
      throw ConfigError(cat("this configuration is predicted not to fit in memory (--force runs it anyway):\n",
                            plan::format_plan(m.plan, m.fixes)));
  }, "checking the memory plan");
  if (fit_code != kExitOk) return fit_code;
  // ckpt.dir and log.metrics writable, with room for the checkpoints, before any step (else exit 2); probed
  // before the lock is taken, so that a read-only directory is reported as such.
  const int output_code = agree_on_startup(world, [&] { train::check_outputs(world, s.cl.config, s.cl.force); },
                                           "probing ckpt.dir and log.metrics");
  if (output_code != kExitOk) return output_code;
  // One job per ckpt.dir: rank 0 takes its lock (another job holding it is exit 2, naming it) before
  // any checkpoint is read or written. Then the checkpoint to resume from, a start-up decision too:
  // one that does not verify, or a fresh start over other runs' checkpoints, is exit 2.
  std::optional<ckpt::DirLock> lock;
  train::ResumePoint resume;
  // From here to step 1 the ranks' work differs (rank 0 hashes every file of the checkpoint it picks,
  // minutes for a multi-GB model, and may watch a dying lock holder; each rank loads its part, reads
  // its shards, builds the model): the loose start-up deadline (dist/deadline.hpp). The trainer
  // tightens it once step 1 completes.
  const double timeout_s = s.cl.config.dist.timeout_s;
  world.set_timeout(dist::kStartUpFactor * timeout_s, dist::start_up_limit_words(timeout_s));
  const int resume_code = agree_on_startup(world, [&] {
    if (!world.is_root()) return;
    lock.emplace(ckpt::DirLock::acquire(s.cl.config.ckpt.dir, ckpt::LockHolder::this_process()));
    resume = train::pick_resume(s.cl.config);
  }, "taking the ckpt.dir lock and choosing the checkpoint to resume from (rank 0 verifies it)");
  if (resume_code != kExitOk) return resume_code;
  // Bad data (no shard, a damaged header, another vocabulary; with data.verify=full a bad chunk) is a
  // start-up error like a bad config: found before any work, printed once.
  data::limit_open_shards(static_cast<std::size_t>(s.cl.config.data.open_shards));
  const int data_code = agree_on_startup(world, [&] {
    if (s.cl.config.rl.enabled()) train::check_rl_inputs(s.cl.config, s.derived.dp_size);
    else train::check_data(s.cl.config, world.rank(), world.size());
    if (!s.cl.config.log.eval_prompts.empty()) train::check_eval_prompts(s.cl.config);
  }, s.cl.config.rl.enabled() ? "checking the RL prompts" : "checking the data shards");
  if (data_code != kExitOk) return data_code;
  return run_or_abort(world, [&] {
    // Held in this frame: an error unwinding out of training releases the lock before run_or_abort
    // ends the job (MPI_Abort runs no destructors). A killed rank 0 leaves it for the next run to take over.
    const std::optional<ckpt::DirLock> held = std::move(lock);
    resume = train::share_resume(world, s.cl.config, resume);
    return train::run(world, s.cl, s.derived, s.placement, resume);
  });
}

}  // namespace
}  // namespace zt::apps

int main(int argc, char** argv) {
  // Before MPI's start-up (a second or more on a loaded node): a stop signal from then on is a request.
  // run() installs them again after MPI_Init, in case the MPI library took either signal.
  zt::train::process_started();
  zt::train::install_stop_signal_handlers();
  zt::dist::set_abort_advice(" so it can resume from the last checkpoint (ckpt.resume=auto)");
  return zt::apps::main_with_world("ztrain", argc, argv, [&](zt::dist::World& world) { return zt::apps::run(world, argc, argv); });
}
