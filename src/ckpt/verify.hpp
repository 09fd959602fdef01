// Whether a checkpoint directory is sound: its manifest parses, lists every file the layout needs,
// its rank ranges tile the parameter space, and each file is present with the recorded size and
// SHA-256. resume=auto, an explicit ckpt.resume path and `zckpt verify` all decide through here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/state.hpp"

namespace zt::ckpt {

// Every problem found, each naming its file (empty: sound). Reads every byte (SHA-256), a PPO
// checkpoint's critic/ too (its files and, as a checkpoint of its own, its structure).
std::vector<std::string> verify(const std::filesystem::path& dir);
// Whether the checkpoint holds PPO's critic (its manifest lists critic/MANIFEST.json).
bool has_critic(const Manifest& m);

struct Skipped {
  std::filesystem::path path;
  std::vector<std::string> problems;
};

struct ResumeSearch {
  std::filesystem::path chosen;  // empty: none verifies
  std::int64_t step = 0;
  std::vector<Skipped> skipped;  // newer than `chosen` (or all, if none), each with why
};

// The newest step_N in ckpt_dir that verifies; step_N.tmp directories (never committed) and step_N
// that fail to verify are skipped and named.
ResumeSearch find_newest_sound(const std::filesystem::path& ckpt_dir);

}  // namespace zt::ckpt
