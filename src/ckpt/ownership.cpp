// Run ids and the rotation that deletes only the current run's checkpoints.
#include "ckpt/ownership.hpp"

#include <unistd.h>

#include <cctype>
#include <ctime>
#include <random>

#include "ckpt/layout.hpp"
#include "ckpt/manifest.hpp"
#include "core/error.hpp"

namespace zt::ckpt {
namespace fs = std::filesystem;

std::string new_run_id() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
  char name[256] = {};
  std::string host = ::gethostname(name, sizeof name - 1) == 0 ? name : "host";
  host = host.substr(0, host.find('.'));  // the short name: ids stay short
  for (char& c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '-';
  if (host.size() > 32) host.resize(32);
  std::random_device rd;
  char random[16];
  std::snprintf(random, sizeof random, "%08x", static_cast<unsigned>(rd()));
  return cat(when, "-", host, "-", ::getpid(), "-", random);
}

std::string run_id_of(const fs::path& step_dir) {
  try {
    return parse_manifest(read_text(step_dir / kManifestFile), kManifestFile).run_id;
  } catch (const Error&) {
    return "";  // no readable manifest: nobody can say whose it is
  }
}

std::string describe_owner(const std::string& run_id) {
  return run_id.empty() ? "owner unknown: no readable manifest names a run (written before run ids, or missing or damaged)" : cat("run ", run_id);
}

Pruned prune(const fs::path& ckpt_dir, std::int64_t keep, const fs::path& protect, const std::string& run_id) {
  Pruned out;
  std::int64_t kept = 1;  // `protect` counts as one of the kept
  for (const StepDir& d : list_step_dirs(ckpt_dir)) {
    std::error_code same_ec;
    if (fs::equivalent(d.path, protect, same_ec)) continue;
    if (!d.tmp) {
      const std::string owner = run_id_of(d.path);
      if (run_id.empty() || owner != run_id) {
        out.foreign.push_back(d.path);
        continue;
      }
      if (keep == 0 || kept < keep) {
        ++kept;
        continue;
      }
    }
    std::error_code ec;
    fs::remove_all(d.path, ec);  // best effort: a checkpoint left behind wastes space, nothing more
    if (!ec) out.deleted.push_back(d.path);
  }
  return out;
}

}  // namespace zt::ckpt
