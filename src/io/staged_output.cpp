// The output rule of the offline tools (staged_output.hpp): check, stage beside, rename into place.
#include "io/staged_output.hpp"

#include <unistd.h>

#include <fstream>
#include <string_view>
#include <utility>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace zt::io {
namespace fs = std::filesystem;

namespace {

// Absolute, symlinks and `..` resolved as far as the path exists (the rest lexically).
fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (ec) r = fs::absolute(p, ec).lexically_normal();
  if (r.filename().empty() && r.has_parent_path() && r != r.root_path()) r = r.parent_path();  // "dir/"
  return r;
}

// One file or directory: the same inode when both exist (a hard link, a bind mount), else equal paths.
bool same(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
  return a == b;
}

// `inner` is `outer` or lies somewhere below it (both resolved).
bool within(const fs::path& inner, const fs::path& outer) {
  for (fs::path p = inner;; p = p.parent_path()) {
    if (same(p, outer)) return true;
    if (!p.has_parent_path() || p.parent_path() == p) return false;
  }
}

std::string pid_suffix(std::string_view kind) { return cat(".", ::getpid(), kind); }

void refuse_guarded(const fs::path& target, const std::string& flag, const fs::path& out,
                    const std::vector<Guarded>& guarded) {
  for (const Guarded& g : guarded) {
    const std::string why = guarded_conflict(target, g);
    if (!why.empty())
      throw ConfigError(cat(flag, " ", out.string(), ": ", why, ": zckpt never writes over what it reads (--overwrite ",
                            "included); give ", flag, " a path outside it"));
  }
}

// The directory the output goes in, created if missing, and the staging directory made in it: the
// first write, so an unwritable place is exit 2 before any work.
fs::path make_staging(const fs::path& parent, const std::string& name, const std::string& flag, const fs::path& out,
                      fs::path& created) {
  std::error_code ec;
  for (fs::path p = parent; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    created = p;  // the outermost directory made here: removed again (if still empty) on a failure
    if (p == p.parent_path()) break;
  }
  fs::create_directories(parent, ec);
  if (ec)
    throw ConfigError(cat(flag, " ", out.string(), ": cannot create its directory ", parent.string(), ": ", ec.message(),
                          "; choose a place you can write, or create it with the right permissions"));
  // A name nobody uses: never remove what is there (a leftover of a killed run is left for its owner).
  for (int attempt = 0; attempt < 100; ++attempt) {
    const fs::path staging = parent / (name + pid_suffix(attempt == 0 ? std::string(".tmp") : cat(".", attempt, ".tmp")));
    if (fs::create_directory(staging, ec)) return staging;
    if (ec && ec != std::errc::file_exists)
      throw ConfigError(cat(flag, " ", out.string(), ": cannot write in ", parent.string(), ": ", ec.message(),
                            "; choose a directory you can write, or fix its permissions"));
  }
  throw ConfigError(cat(flag, " ", out.string(), ": 100 temporary directories ", name, pid_suffix(".*.tmp"), " exist in ",
                        parent.string(), ": remove them"));
}

// fsync every file below `dir`, then the directories, so the rename publishes complete data.
void fsync_tree(const fs::path& dir) {
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() || e.is_directory()) fsync_path(e.path());
  fsync_path(dir);
}

// `file` already holds the content `known` gives for `name`: rewriting it changes nothing.
bool holds(const fs::path& file, const std::string& name, const std::vector<std::pair<std::string, std::string>>& known) {
  for (const auto& [n, content] : known) {
    if (n != name) continue;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec) || fs::file_size(file, ec) != content.size() || ec) return false;
    std::ifstream in(file, std::ios::binary);
    std::string bytes(content.size(), '\0');
    return in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())) && bytes == content;
  }
  return false;
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw IoError(cat("cannot rename ", from.string(), " to ", to.string(), ": ", ec.message()));
}

}  // namespace

std::string guarded_conflict(const fs::path& target, const Guarded& guarded) {
  const fs::path t = resolved(target), g = resolved(guarded.path);
  const std::string where = cat(" (", g.string(), ")");  // resolved: what it is on disk, whatever the spelling
  if (same(t, g)) return cat("is ", guarded.what, where);
  if (within(t, g)) return cat("lies inside ", guarded.what, where);
  if (within(g, t)) return cat("holds ", guarded.what, where, ", which writing there would replace");
  return "";
}

StagedOutput StagedOutput::directory(const fs::path& out, const std::string& flag, const std::vector<Guarded>& guarded,
                                     bool overwrite) {
  StagedOutput s;
  s.target_ = resolved(out);
  refuse_guarded(s.target_, flag, out, guarded);
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(s.target_, ec);
  if (fs::exists(st) && !overwrite) {
    const bool empty_dir = fs::is_directory(st) && fs::is_empty(s.target_, ec) && !ec;
    if (!empty_dir)
      throw ConfigError(cat(flag, " ", out.string(), ": exists", fs::is_directory(st) ? " and is not empty" : " (not a directory)",
                            ": give a new or empty directory, or add --overwrite to replace ", out.string(),
                            " and everything in it"));
  }
  s.staging_ = make_staging(s.target_.parent_path(), s.target_.filename().string(), flag, out, s.created_);
  return s;
}

StagedOutput StagedOutput::files(const fs::path& dir, const std::vector<std::string>& names, const std::string& flag,
                                 const std::vector<Guarded>& guarded, bool overwrite,
                                 const std::vector<std::pair<std::string, std::string>>& known) {
  StagedOutput s;
  s.target_ = resolved(dir.empty() ? fs::path(".") : dir);
  s.names_ = names;
  for (const std::string& name : names) {
    const fs::path file = s.target_ / name;
    refuse_guarded(file, flag, dir / name, guarded);
    std::error_code ec;
    if (fs::is_directory(file, ec))
      throw ConfigError(cat(flag, ": ", (dir / name).string(), " is a directory; give ", flag, " a file path"));
    if (fs::exists(fs::symlink_status(file, ec)) && !overwrite && !holds(file, name, known))
      throw ConfigError(cat(flag, ": ", (dir / name).string(), " exists", name == names.front() ? "" : " (another export's?)",
                            ": give another path, or add --overwrite to replace it"));
  }
  s.staging_ = make_staging(s.target_, names.front(), flag, dir / names.front(), s.created_);
  return s;
}

StagedOutput::StagedOutput(StagedOutput&& o) noexcept
    : target_(std::move(o.target_)), names_(std::move(o.names_)), staging_(std::move(o.staging_)),
      created_(std::move(o.created_)), committed_(o.committed_) {
  o.staging_.clear();
}

StagedOutput::~StagedOutput() { discard(); }

void StagedOutput::discard() noexcept {
  if (committed_ || staging_.empty()) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
  if (created_.empty()) return;
  for (fs::path p = staging_.parent_path(); fs::remove(p, ignored) && p != created_;) p = p.parent_path();  // empty ones only
}

void StagedOutput::commit() {
  fsync_tree(staging_);
  if (!names_.empty()) {
    for (const std::string& name : names_) rename_or_throw(staging_ / name, target_ / name);
    committed_ = true;
    std::error_code ignored;
    fs::remove_all(staging_, ignored);
    return fsync_path(target_);
  }
  std::error_code ec;
  const fs::path aside = target_.string() + pid_suffix(".old");
  const bool replace = fs::exists(fs::symlink_status(target_, ec));
  if (replace) rename_or_throw(target_, aside);
  fs::rename(staging_, target_, ec);
  if (ec) {
    if (replace) fs::rename(aside, target_, ec);
    throw IoError(cat("cannot rename ", staging_.string(), " to ", target_.string(), ": ", ec.message()));
  }
  committed_ = true;
  if (replace) fs::remove_all(aside, ec);
  fsync_path(target_.parent_path());
}

}  // namespace zt::io
