// Which checkpoint a run resumes from (ckpt.resume): decided on rank 0 at start-up, before any
// training, so a bad explicit path is a start-up error (exit 2), then shared with every rank.
#pragma once

#include <cstdint>
#include <filesystem>

#include "config/config.hpp"
#include "dist/world.hpp"

namespace zt::train {

struct ResumePoint {
  std::filesystem::path dir;  // empty: start from step 0
  std::int64_t step = 0;
  bool empty() const { return dir.empty(); }
};

// Rank 0 (others return an empty point): `auto` takes the newest step_N in ckpt.dir that verifies,
// logs it and warns about each newer one it skipped, with why; a path must verify; `none` starts
// afresh. Throws InputError (exit 2) for a path that does not verify or a checkpoint that does not
// fit this run (model shape, global_batch, seq_len).
ResumePoint pick_resume(const config::Config& config);

// Collective: every rank gets rank 0's choice.
ResumePoint share_resume(const dist::World& world, const config::Config& config, const ResumePoint& root_choice);

}  // namespace zt::train
