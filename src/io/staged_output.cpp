// The output rule of the offline tools (staged_output.hpp): check, stage beside, rename into place.
#include "io/staged_output.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <mutex>
#include <set>
#include <thread>

#include <fstream>
#include <string_view>
#include <utility>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

extern char** environ;

namespace zt::io {
namespace fs = std::filesystem;

namespace {

// The staging directories in progress, for remove_staging_on_stop_signals' thread.
std::mutex staging_mutex;
std::set<std::string>& stagings() {
  static std::set<std::string> paths;
  return paths;
}
void untrack(const fs::path& staging) {
  const std::lock_guard lock(staging_mutex);
  stagings().erase(staging.string());
}

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
    const std::lock_guard lock(staging_mutex);  // made and tracked at once: a stop signal sees it, or it is never made
    if (fs::create_directory(staging, ec)) {
      stagings().insert(staging.string());
      return staging;
    }
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
  untrack(staging_);
  if (created_.empty()) return;
  for (fs::path p = staging_.parent_path(); fs::remove(p, ignored) && p != created_;) p = p.parent_path();  // empty ones only
}

void StagedOutput::commit() {
  fsync_tree(staging_);
  untrack(staging_);  // from here its files are being renamed into place
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

namespace {
int stop_pipe[2] = {-1, -1};
void on_staging_stop_signal(int sig) {  // async-signal-safe: the signal's number to the cleanup thread
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t written = ::write(stop_pipe[1], &b, 1);
}
}  // namespace

// A handler, not a blocked mask and sigwait: threads that libraries start before main (OpenBLAS's pool)
// would take a process-directed signal with its default action.
void remove_staging_on_stop_signals() {
  if (::pipe2(stop_pipe, O_CLOEXEC) != 0) return;  // no cleanup then: the signals keep their default action
  std::thread([] {
    unsigned char b = 0;
    while (::read(stop_pipe[0], &b, 1) < 0 && errno == EINTR) {
    }
    const int sig = b;
    staging_mutex.lock();  // held until the end: no staging directory is made after these are set aside
    // Each staging directory and the siblings its writers made (OUT.<pid>.tmp.tmp, ...) renamed away at
    // once, so that the writers still running fail rather than refill them; an rm of its own removes them
    // while this process ends (the other threads cannot be stopped, and a large copy takes a while).
    std::vector<std::string> doomed;
    for (const std::string& path : stagings()) {
      const fs::path staging(path);
      std::error_code ec;
      for (const fs::directory_entry& e : fs::directory_iterator(staging.parent_path(), ec)) {
        const std::string name = e.path().filename().string();
        if (!name.starts_with(staging.filename().string()) || name.ends_with(".removing")) continue;
        const fs::path away = e.path().string() + ".removing";
        std::error_code renamed;
        fs::rename(e.path(), away, renamed);
        if (!renamed) doomed.push_back(away.string());
      }
    }
    if (!doomed.empty()) {
      std::vector<char*> argv{const_cast<char*>("rm"), const_cast<char*>("-rf"), const_cast<char*>("--")};
      for (std::string& d : doomed) argv.push_back(d.data());
      argv.push_back(nullptr);
      pid_t pid = 0;
      posix_spawnp(&pid, "rm", nullptr, nullptr, argv.data(), environ);
    }
    std::signal(sig, SIG_DFL);
    std::raise(sig);  // ends the process as the signal would have (its status says so)
  }).detach();
  struct sigaction sa {};
  sa.sa_handler = on_staging_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
}

}  // namespace zt::io
