// Where a checkpoint's files live (docs/guide/checkpoints.md, "Layout"):
//   ckpt.dir/step_NNNNNNNN/            the state after N optimizer steps, once committed
//     MANIFEST.json                    written last: a directory without it is never resumed from
//     model.h5                         every parameter under its HF name and shape, fp32
//     state.json                       step, tokens, data cursor, seed, loss scale, config, revision
//     optim/rank_RRRRR_of_WWWWW.h5     rank R's master weights and AdamW moments with their ranges
//     critic/                          rl.algorithm=ppo: the critic, a checkpoint of its own in the same
//                                      layout (its MANIFEST.json, model.h5, state.json, optim/), its files
//                                      also listed in the outer manifest and committed by the same rename
//   ckpt.dir/step_NNNNNNNN.tmp/        being written (or left by a job that died while writing)
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace zt::ckpt {

namespace fs = std::filesystem;

inline const char* const kManifestFile = "MANIFEST.json";
inline const char* const kModelFile = "model.h5";
inline const char* const kStateFile = "state.json";
inline const char* const kTmpSuffix = ".tmp";
inline const char* const kCriticDir = "critic";  // PPO's critic (a part: writer.hpp)

std::string step_dir_name(std::int64_t step);                 // step_00000012
std::string optim_file_name(int rank, int world_size);         // optim/rank_00001_of_00004.h5
// The step of a directory name step_NNNNNNNN (with the .tmp suffix if `tmp`), or nothing.
std::optional<std::int64_t> parse_step_dir(const std::string& name, bool tmp = false);

struct StepDir {
  std::int64_t step = 0;
  fs::path path;
  bool tmp = false;  // step_N.tmp: not committed
};
// The step_N and step_N.tmp directories in ckpt_dir, newest step first (committed before .tmp of the
// same step). A missing ckpt_dir has none.
std::vector<StepDir> list_step_dirs(const fs::path& ckpt_dir);

}  // namespace zt::ckpt
