// Checkpoint directory and file names.
#include "ckpt/layout.hpp"

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"

namespace zt::ckpt {

std::string step_dir_name(std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return name;
}

std::string optim_file_name(int rank, int world_size) {
  char name[64];
  std::snprintf(name, sizeof name, "optim/rank_%05d_of_%05d.h5", rank, world_size);
  return name;
}

std::optional<std::int64_t> parse_step_dir(const std::string& name, bool tmp) {
  std::string digits = name;
  if (tmp) {
    if (!digits.ends_with(kTmpSuffix)) return std::nullopt;
    digits.resize(digits.size() - std::string(kTmpSuffix).size());
  }
  if (!digits.starts_with("step_") || digits.size() < 6) return std::nullopt;
  digits = digits.substr(5);
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

std::vector<StepDir> list_step_dirs(const fs::path& ckpt_dir) {
  std::vector<StepDir> out;
  std::error_code ec;
  if (!fs::is_directory(ckpt_dir, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(ckpt_dir, ec)) {
    if (!e.is_directory(ec)) continue;
    const std::string name = e.path().filename().string();
    if (auto step = parse_step_dir(name)) out.push_back({*step, e.path(), false});
    else if (auto tmp_step = parse_step_dir(name, true)) out.push_back({*tmp_step, e.path(), true});
  }
  if (ec) throw IoError(cat("cannot list the checkpoint directory ", ckpt_dir.string(), ": ", ec.message()));
  std::sort(out.begin(), out.end(), [](const StepDir& a, const StepDir& b) {
    return a.step != b.step ? a.step > b.step : !a.tmp && b.tmp;
  });
  return out;
}

}  // namespace zt::ckpt
