// Which checkpoint a run resumes from (ckpt.resume): decided on rank 0 at start-up, before any
// training, so a bad explicit path is a start-up error (exit 2), then shared with every rank.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "config/config.hpp"
#include "dist/world.hpp"

namespace zt::train {

struct ResumePoint {
  std::filesystem::path dir;  // empty: start from step 0
  std::int64_t step = 0;
  std::string run_id;         // this run's identity (ckpt/ownership.hpp): the resumed checkpoint's, or new
  bool empty() const { return dir.empty(); }
};

// Rank 0 (others return an empty point), once it holds ckpt.dir's lock: `auto` takes the newest
// step_N in ckpt.dir that verifies, logs it and warns about each newer one it skipped, with why; a
// path must verify; `none` starts afresh. Throws InputError (exit 2) for a path that does not verify,
// a checkpoint that does not fit this run (model shape, global_batch, seq_len), and, unless
// ckpt.overwrite, a fresh start over checkpoints it does not own: `none` in a ckpt.dir holding any, or
// `auto` finding step_N directories none of which verifies (each is named with why).
ResumePoint pick_resume(const config::Config& config);

// Collective: every rank gets rank 0's choice and run id.
ResumePoint share_resume(const dist::World& world, const config::Config& config, const ResumePoint& root_choice);

}  // namespace zt::train
