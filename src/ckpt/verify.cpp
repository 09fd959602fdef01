// Checkpoint verification: structure first (cheap), then every file's size and SHA-256.
#include "ckpt/verify.hpp"

#include <algorithm>
#include <map>

#include "ckpt/layout.hpp"
#include "ckpt/manifest.hpp"
#include "ckpt/writer.hpp"
#include "core/error.hpp"

namespace zt::ckpt {
namespace fs = std::filesystem;

namespace {

// The rank ranges must tile [0, flat_numel): no gap (an element nobody saved), no overlap.
void check_tiling(const Manifest& m, std::vector<std::string>& problems) {
  if (static_cast<int>(m.rank_ranges.size()) != m.world_size || m.world_size < 1) {
    problems.push_back(cat("MANIFEST.json: ", m.rank_ranges.size(), " ranks listed for world_size ", m.world_size));
    return;
  }
  std::vector<FlatRange> all;
  for (const auto& ranges : m.rank_ranges) all.insert(all.end(), ranges.begin(), ranges.end());
  std::sort(all.begin(), all.end(), [](const FlatRange& a, const FlatRange& b) { return a.offset < b.offset; });
  std::int64_t next = 0;
  for (const FlatRange& r : all) {
    if (r.numel <= 0 || r.offset != next) {
      problems.push_back(cat("MANIFEST.json: the rank ranges do not tile the ", m.model.flat_numel,
                             " parameters (at element ", next, ")"));
      return;
    }
    next += r.numel;
  }
  if (next != m.model.flat_numel)
    problems.push_back(cat("MANIFEST.json: the rank ranges cover ", next, " of ", m.model.flat_numel, " parameters"));
}

// Every file the layout needs is listed; each listed file is present, of its size and checksum.
// hash=false: sizes only (a part whose checksums the outer manifest's check covered).
void check_files(const fs::path& dir, const Manifest& m, std::vector<std::string>& problems, bool hash) {
  std::map<std::string, const FileRecord*> listed;
  for (const FileRecord& f : m.files) listed[f.path] = &f;
  std::vector<std::string> needed = {kModelFile, kStateFile};
  for (int r = 0; r < m.world_size; ++r) needed.push_back(optim_file_name(r, m.world_size));
  for (const std::string& name : needed)
    if (!listed.count(name)) problems.push_back(cat(name, ": not listed in MANIFEST.json"));
  for (const FileRecord& f : m.files) {
    const fs::path path = dir / f.path;
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(path, ec);
    if (ec) {
      problems.push_back(cat(f.path, ": missing (", ec.message(), ")"));
    } else if (size != f.bytes) {
      problems.push_back(cat(f.path, ": ", size, " bytes, the manifest says ", f.bytes, size < f.bytes ? " (truncated)" : ""));
    } else if (hash) {
      try {
        if (file_record(dir, f.path).sha256 != f.sha256)
          problems.push_back(cat(f.path, ": SHA-256 differs from the manifest's (the file is corrupt)"));
      } catch (const Error& e) {
        problems.push_back(cat(f.path, ": ", e.what()));
      }
    }
  }
}

}  // namespace

bool has_critic(const Manifest& m) {
  const std::string part_manifest = cat(kCriticDir, "/", kManifestFile);
  return std::any_of(m.files.begin(), m.files.end(), [&](const FileRecord& f) { return f.path == part_manifest; });
}

namespace {
std::vector<std::string> verify_dir(const fs::path& dir, bool hash) {
  std::vector<std::string> problems;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {cat(dir.string(), ": not a directory")};
  if (!fs::exists(dir / kManifestFile, ec))
    return {cat(kManifestFile, ": missing (never committed: the job stopped while writing it)")};
  Manifest m;
  try {
    m = parse_manifest(read_text(dir / kManifestFile), kManifestFile);
  } catch (const Error& e) {
    return {e.what()};
  }
  const auto named_step = parse_step_dir(dir.filename().string());
  if (named_step && *named_step != m.step)
    problems.push_back(cat(kManifestFile, ": step ", m.step, " but the directory is named for step ", *named_step));
  check_tiling(m, problems);
  check_files(dir, m, problems, hash);
  // A part (PPO's critic) listed by the manifest is a checkpoint of its own: its structure too. Its
  // files' checksums were checked above, as the outer manifest lists them.
  if (has_critic(m))
    for (const std::string& p : verify_dir(dir / kCriticDir, false)) problems.push_back(cat(kCriticDir, "/", p));
  return problems;
}
}  // namespace

std::vector<std::string> verify(const fs::path& dir) { return verify_dir(dir, true); }

ResumeSearch find_newest_sound(const fs::path& ckpt_dir) {
  ResumeSearch out;
  for (const StepDir& d : list_step_dirs(ckpt_dir)) {
    std::vector<std::string> problems =
        d.tmp ? std::vector<std::string>{"never committed (the job stopped while writing it)"} : verify(d.path);
    if (problems.empty()) {
      out.chosen = d.path;
      out.step = d.step;
      return out;
    }
    out.skipped.push_back({d.path, std::move(problems)});
  }
  return out;
}

}  // namespace zt::ckpt
