// Start-up probes of ckpt.dir, log.metrics and rl.rollout_dir (output_check.hpp).
#include "train/output_check.hpp"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/layout.hpp"
#include "ckpt/writer.hpp"
#include "core/error.hpp"
#include "core/flat_range.hpp"
#include "core/log.hpp"
#include "io/direct_file.hpp"
#include "io/dir_probe.hpp"
#include "optim/zero/model_adapters.hpp"
#include "plan/memory_plan.hpp"

namespace zt::train {
namespace fs = std::filesystem;

namespace {
// HDF5's superblock, object headers and chunk index per file, generously (measured: about 6 KiB).
constexpr std::uint64_t kFileOverheadBytes = 64 << 10;

std::string mib(std::uint64_t bytes) { return cat(static_cast<double>(bytes) / (1 << 20), " MiB"); }

// Checkpoints on disk at once: ckpt.keep committed ones plus the one being written (a save is
// committed before the oldest is pruned), less those already there. keep=0 keeps all: the next one.
std::uint64_t copies_needed(const config::CkptConfig& c, std::string& why) {
  if (c.keep == 0) {
    why = "the next checkpoint (ckpt.keep=0 keeps all: later ones need more)";
    return 1;
  }
  std::int64_t existing = 0;
  for (const ckpt::StepDir& d : ckpt::list_step_dirs(c.dir)) existing += d.tmp ? 0 : 1;
  const std::int64_t copies = std::max<std::int64_t>(1, c.keep + 1 - existing);
  why = cat(copies, " more checkpoint(s): ckpt.keep=", c.keep, " plus the one being written, ", existing,
            " already in ckpt.dir");
  return static_cast<std::uint64_t>(copies);
}

void check_ckpt_dir(const dist::World& world, const config::Config& c, bool force) {
  const std::string fix = " Fix: make ckpt.dir writable by every rank (a directory on a shared, writable file "
                          "system), or point ckpt.dir elsewhere.";
  const fs::path dir = c.ckpt.dir.empty() ? fs::path(".") : fs::path(c.ckpt.dir);  // '' writes step_N/ here
  const std::string error = io::probe_writable_dir(dir, world.host());
  if (!error.empty())
    throw ConfigError(cat("ckpt.dir=", c.ckpt.dir, " is not writable on host ", world.host(), " (rank ", world.rank(),
                          "): ", error, ". Every checkpoint would be lost.", fix));
  std::string why;
  const std::uint64_t one = predicted_checkpoint_bytes(c, world.size());
  const std::uint64_t need = one * copies_needed(c.ckpt, why);
  const std::uint64_t free = io::free_bytes(dir);
  if (free < need && !force)
    throw ConfigError(cat("ckpt.dir=", c.ckpt.dir, " has ", mib(free), " free on host ", world.host(), "; this run needs ",
                          mib(need), " (", mib(one), " per checkpoint x ", why, "). Fix: free space there, lower "
                          "ckpt.keep, or point ckpt.dir at a larger file system (--force runs it anyway)."));
}

// Bytes of earlier runs' offload files under `dir` (rank_*/*.bin): truncated when a rank reuses its own,
// so they count as free. A live job's would not be, but its lock then refuses the run anyway.
std::uint64_t stale_offload_bytes(const fs::path& dir) {
  std::uint64_t bytes = 0;
  std::error_code ec;
  for (const fs::directory_entry& rank : fs::directory_iterator(dir, ec)) {
    if (!rank.is_directory(ec) || rank.path().filename().string().rfind("rank_", 0) != 0) continue;
    for (const fs::directory_entry& f : fs::directory_iterator(rank.path(), ec))
      if (f.is_regular_file(ec) && f.path().extension() == ".bin") bytes += f.file_size(ec);
  }
  return bytes;
}

// A dead run's offload files of ranks this run does not have (it resumed on fewer ranks) are never reused:
// removed at start-up, and said, unless their lock is held (another job's) (outside sweep 32 F5: they
// stayed on the node-local disk for good, counted as free).
void remove_dead_ranks_offload_files(const fs::path& dir, int world_size, const std::string& host) {
  std::error_code ec;
  std::uint64_t bytes = 0;
  std::vector<std::string> removed;
  for (const fs::directory_entry& rank : fs::directory_iterator(dir, ec)) {
    const std::string name = rank.path().filename().string();
    if (!rank.is_directory(ec) || name.rfind("rank_", 0) != 0) continue;
    const std::string index = name.substr(5);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos || std::stoll(index) < world_size) continue;
    for (const fs::directory_entry& f : fs::directory_iterator(rank.path(), ec)) {
      if (!f.is_regular_file(ec) || f.path().extension() != ".bin") continue;
      const std::uint64_t size = f.file_size(ec);
      if (io::remove_if_unlocked(f.path())) bytes += size, removed.push_back(f.path().string());
    }
    fs::remove(rank.path(), ec);  // when empty
  }
  if (!removed.empty())
    log::info(cat("offload.nvme_dir on host ", host, ": removed ", removed.size(), " offload file(s) of ranks this run does ",
                  "not have, left by a run that ended without cleaning up (", removed.front(),
                  removed.size() > 1 ? ", ..." : "", "; ", mib(bytes), ")"));
}

// offload.to=nvme: offload.nvme_dir exists (a node-local disk's mount: never created, a missing one is
// a typo or an unmounted disk) and is writable, with room for this node's ranks' files (each rank
// then preallocates its own, the exact check).
void check_nvme_dir(const dist::World& world, const config::Config& c, bool force) {
  const fs::path dir(c.offload.nvme_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw ConfigError(cat("offload.nvme_dir=", c.offload.nvme_dir, fs::exists(dir, ec) ? " is not a directory" : " does not exist",
                          " on host ", world.host(), ". Fix: mount the node-local NVMe disk there on every node, or point "
                          "offload.nvme_dir at a directory on one (or use offload.to=host)"));
  const std::string error = io::probe_writable_dir(dir, world.host());
  if (!error.empty())
    throw ConfigError(cat("offload.nvme_dir=", c.offload.nvme_dir, " is not writable on host ", world.host(), ": ", error,
                          ". Fix: make it writable by the job, or point offload.nvme_dir elsewhere"));
  remove_dead_ranks_offload_files(dir, world.size(), world.host());
  const std::uint64_t per_rank = plan::plan_memory(c, world.size(), 1, 0).nvme_bytes;
  const std::uint64_t need = per_rank * static_cast<std::uint64_t>(world.local_size());
  const std::uint64_t free = io::free_bytes(dir) + stale_offload_bytes(dir);
  if (free < need && !force)
    throw ConfigError(cat("offload.nvme_dir=", c.offload.nvme_dir, " has ", mib(free), " free on host ", world.host(),
                          "; this run's offloaded state needs ", mib(need), " there (", mib(per_rank), " per rank x ",
                          world.local_size(), " rank(s) on the node). Fix: free space there, point offload.nvme_dir at a "
                          "larger node-local disk, use more nodes (the state is sharded), or offload.to=host"));
}

void check_metrics(const dist::World& world, const config::Config& c) {
  const fs::path file(c.log.metrics);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::string error = io::probe_writable_dir(dir, world.host());
  std::error_code ec;
  if (error.empty() && fs::exists(file, ec)) error = io::probe_appendable_file(file);
  if (!error.empty())
    throw ConfigError(cat("log.metrics=", c.log.metrics, " cannot be written: ", error,
                          ". Fix: make its directory writable, or set log.metrics to another path (empty = none)."));
}

// rl.rollout_dir: rank 0 writes each iteration's rollouts there; made now if missing (as the first write
// would) and probed, so that a bad path is exit 2 here, not an error after the first iteration's work.
void check_rollout_dir(const dist::World& world, const config::Config& c) {
  const std::string error = io::probe_writable_dir(c.rl.rollout_dir, world.host());
  if (!error.empty())
    throw ConfigError(cat("rl.rollout_dir=", c.rl.rollout_dir, " cannot be written on host ", world.host(), ": ", error,
                          ". Fix: point rl.rollout_dir at a writable directory, or leave it empty (no rollouts on disk)."));
}
}  // namespace

namespace {
// As stored: whole HDF5 chunks (ckpt::stored_elements; outside sweep 29 F4: 20% more than the values on a
// tiny model, the first save then short of space).
std::uint64_t checkpoint_bytes(const model::ParamTable& table, int world_size) {
  std::uint64_t shard_floats = 0;
  for (int r = 0; r < world_size; ++r) {
    std::uint64_t mine = 0;
    for (const FlatRange& range : optim::checkpoint_ranges(table, world_size, r)) mine += static_cast<std::uint64_t>(range.numel);
    shard_floats += ckpt::stored_elements({mine});
  }
  std::uint64_t model_floats = 0;
  for (const model::ParamInfo& p : table.params())
    model_floats += ckpt::stored_elements(std::vector<std::uint64_t>(p.hf_shape.begin(), p.hf_shape.end()));
  const std::uint64_t files = static_cast<std::uint64_t>(world_size) + 3;  // shards, model.h5, state, manifest
  return 3 * sizeof(float) * shard_floats + sizeof(float) * model_floats + files * kFileOverheadBytes;
}
}  // namespace

std::uint64_t predicted_checkpoint_bytes(const config::Config& config, int world_size) {
  const model::ParamTable table(model::model_shape(config.model));
  std::uint64_t bytes = checkpoint_bytes(table, world_size);
  if (config.rl.enabled() && config.rl.algorithm == config::RlAlgorithm::kPpo)  // the critic, in critic/
    bytes += checkpoint_bytes(model::ParamTable(model::value_model_shape(table.shape())), world_size);
  return bytes;
}

void check_outputs(const dist::World& world, const config::Config& config, bool force) {
  if (world.local_rank() == 0) check_ckpt_dir(world, config, force);  // every node writes its ranks' shards
  const bool nvme = config.train.offload != config::Offload::kNone && config.offload.to == config::OffloadTo::kNvme;
  if (nvme && world.local_rank() == 0) check_nvme_dir(world, config, force);
  if (world.is_root() && !config.log.metrics.empty()) check_metrics(world, config);
  if (world.is_root() && config.rl.enabled() && !config.rl.rollout_dir.empty()) check_rollout_dir(world, config);
}

}  // namespace zt::train
