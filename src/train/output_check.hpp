// Start-up checks of what the run will write, so that a read-only or full target stops the job
// (exit 2) before the first step instead of losing the run at its first save: ckpt.dir on every node
// (every rank writes its shard there) and log.metrics on rank 0.
#pragma once

#include <cstdint>

#include "config/config.hpp"
#include "dist/world.hpp"

namespace zt::train {

// Bytes one checkpoint of this configuration on `world_size` ranks takes on disk: every rank's
// optimizer shard (fp32 master, exp_avg, exp_avg_sq of its ranges), model.h5 (fp32, HF shapes) and
// the small files, with an allowance for HDF5's metadata; a PPO run's critic (critic/) likewise.
std::uint64_t predicted_checkpoint_bytes(const config::Config& config, int world_size);

// Not collective (the caller agrees on the outcome, agree_on_startup): the first rank of each node
// probes ckpt.dir (creating it if missing) and compares its free space with the checkpoints this run
// will hold at once, and with offload.to=nvme probes offload.nvme_dir (which must exist) and compares
// its free space with the node's ranks' files; rank 0 probes log.metrics' directory and an RL run's rl.rollout_dir (made
// if missing). Throws ConfigError naming the path, the
// error, the bytes needed and free, and the fix. `force` (--force) lets a run short of space start.
void check_outputs(const dist::World& world, const config::Config& config, bool force);

}  // namespace zt::train
