// ckpt.dir's lock file: atomic link() to take it, an mtime heartbeat to keep it, and takeover of a
// holder that is gone (dir_lock.hpp says why each).
#include "ckpt/dir_lock.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "core/error.hpp"
#include "core/read_file.hpp"
#include "core/log.hpp"

namespace zt::ckpt {
namespace fs = std::filesystem;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::string pid_namespace() {
  char link[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof link - 1);
  return n > 0 ? std::string(link, static_cast<std::size_t>(n)) : "";
}

// kill(pid, 0) probes without signalling: EPERM means it exists (another user's). A zombie (killed,
// not yet reaped: common where PID 1 reaps slowly) answers too, but is gone: /proc says 'Z'.
bool pid_alive(long pid) {
  if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)) return false;
  std::ifstream stat(cat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc: trust kill()
  const std::size_t paren = line.rfind(')');    // "pid (comm) S ...": comm may hold spaces
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

std::string read_all(const fs::path& path) { return read_file(path).value_or(std::string()); }

std::optional<struct timespec> mtime_of(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st.st_mtim;
}

double seconds_between(const struct timespec& later, const struct timespec& earlier) {
  return static_cast<double>(later.tv_sec - earlier.tv_sec) + 1e-9 * static_cast<double>(later.tv_nsec - earlier.tv_nsec);
}

// A new file in dir, created exclusively under a name no other process picks, holding `text`, fsynced.
fs::path write_unique(const fs::path& dir, const std::string& suffix, const std::string& text) {
  std::random_device rd;
  const fs::path path = dir / cat(kLockFile, ".", suffix, ".", ::getpid(), ".", std::hex, rd());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    throw ConfigError(cat("cannot create ", path.string(), ": ", std::strerror(errno),
                          " (ckpt.dir must be writable: it holds the lock that keeps two jobs apart)"));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    throw ConfigError(cat("cannot write ", path.string(), ": ", std::strerror(saved)));
  }
  return path;
}

// Links `mine` to `lock`. On NFS a link whose reply was lost reports failure though it happened, so
// the link count of `mine` decides. Where hard links are not supported, an exclusive create does.
bool try_link(const fs::path& mine, const fs::path& lock, const std::string& text) {
  if (::link(mine.c_str(), lock.c_str()) == 0) return true;
  const int err = errno;
  struct stat st {};
  if (::stat(mine.c_str(), &st) == 0 && st.st_nlink == 2) return true;
  if (err == EEXIST) return false;
  if (err != EPERM && err != ENOTSUP && err != EOPNOTSUPP && err != EMLINK)
    throw ConfigError(cat("cannot create the lock file ", lock.string(), ": ", std::strerror(err)));
  const int fd = ::open(lock.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    throw ConfigError(cat("cannot create the lock file ", lock.string(), ": ", std::strerror(errno)));
  }
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::fsync(fd);
  ::close(fd);
  return ok;
}

struct Found {
  std::string text;
  LockHolder holder;
  double heartbeat_age_s = 0;
};

// Why `held` may be taken over by `me`, or "" if its holder may still be alive.
std::string stale_reason(const Found& held, const LockHolder& me, double stale_after_s) {
  const LockHolder& h = held.holder;
  const bool here = h.host == me.host && h.pid_ns == me.pid_ns;
  if (h.job != "none" && h.job == me.job && !(here && pid_alive(h.pid)))
    return cat("it is this batch job (", h.job, ") started again, e.g. requeued: its earlier process is gone");
  if (here && !pid_alive(h.pid)) return cat("its process ", h.pid, " on this host is gone");
  if (held.heartbeat_age_s > stale_after_s)
    return cat("its last heartbeat is ", static_cast<long>(held.heartbeat_age_s), " s old (a holder is gone after ",
               static_cast<long>(stale_after_s), " s)");
  return "";
}

// Removes `lock` if it still holds `stale_text`, under a short-lived guard file, so that of two jobs
// taking over one stale lock at once the second cannot remove the lock the first has just taken.
// Returns false if another job is taking it over right now (the caller tries again).
bool remove_stale(const fs::path& dir, const fs::path& lock, const std::string& stale_text,
                  const struct timespec& now) {
  const fs::path guard = dir / cat(kLockFile, ".takeover");
  const int fd = ::open(guard.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    // A guard is held for milliseconds: an old one was left by a job that died during a takeover.
    const auto guard_mtime = mtime_of(guard);
    if (guard_mtime && seconds_between(now, *guard_mtime) > kHeartbeatS) ::unlink(guard.c_str());
    return false;
  }
  ::close(fd);
  const bool same = read_all(lock) == stale_text;
  if (same) ::unlink(lock.c_str());
  ::unlink(guard.c_str());
  return same;
}

}  // namespace

LockHolder LockHolder::this_process() {
  LockHolder h;
  h.job = env_or("SLURM_JOB_ID", env_or("PBS_JOBID", "none"));
  h.host = host_name();
  h.pid = static_cast<long>(::getpid());
  h.pid_ns = pid_namespace();
  h.since = utc_now();
  return h;
}

std::string LockHolder::text() const {
  return cat("job=", job, "\nhost=", host, "\npid=", pid, "\npid_ns=", pid_ns, "\nsince=", since, "\n");
}

LockHolder LockHolder::parse(const std::string& text) {
  LockHolder h;
  h.job.clear();
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "job") h.job = value;
    else if (key == "host") h.host = value;
    else if (key == "pid") h.pid = std::strtol(value.c_str(), nullptr, 10);
    else if (key == "pid_ns") h.pid_ns = value;
    else if (key == "since") h.since = value;
  }
  return h;
}

std::string LockHolder::describe() const {
  return cat("job ", job.empty() ? "?" : job, ", host ", host.empty() ? "?" : host, ", pid ", pid, ", since ",
             since.empty() ? "?" : since);
}

DirLock DirLock::acquire(const fs::path& ckpt_dir, const LockHolder& me, double stale_after_s, double heartbeat_s,
                         double dying_grace_s) {
  std::error_code ec;
  fs::create_directories(ckpt_dir, ec);
  if (ec) throw ConfigError(cat("cannot create ckpt.dir=", ckpt_dir.string(), ": ", ec.message(), " (give a writable directory)"));
  const fs::path lock = ckpt_dir / kLockFile;
  const std::string text = me.text();
  const fs::path mine = write_unique(ckpt_dir, me.host, text);
  struct Unlink {
    const fs::path& p;
    ~Unlink() { ::unlink(p.c_str()); }
  } unlink_mine{mine};
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(dying_grace_s);
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (try_link(mine, lock, text)) return DirLock(lock, me, heartbeat_s);
    Found held{read_all(lock), {}, 0};
    if (held.text.empty() && !fs::exists(lock, ec)) continue;  // released meanwhile
    held.holder = LockHolder::parse(held.text);
    const auto now = mtime_of(mine), then = mtime_of(lock);
    if (now && then) held.heartbeat_age_s = std::max(0.0, seconds_between(*now, *then));
    const std::string why = stale_reason(held, me, stale_after_s);
    // A holder here that is alive may be dying: mpirun returns once a job failed, while its rank 0
    // (which catches SIGTERM to checkpoint) lives on until the SIGKILL that follows.
    const bool here = held.holder.host == me.host && held.holder.pid_ns == me.pid_ns;
    if (why.empty() && here && std::chrono::steady_clock::now() < give_up) {
      --attempt;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    // A lock that names no holder (empty, not ztrain's text, a directory: a shared file system may show a
    // lock before its text) is held like any other until its heartbeat is old; the refusal says what it is.
    if (why.empty() && held.holder.host.empty() && held.holder.pid == 0)
      throw ConfigError(cat("ckpt.dir=", ckpt_dir.string(), ": its lock file ", lock.string(), " names no job (",
                            fs::is_directory(lock, ec) ? "a directory" : held.text.empty() ? "empty" : "no job=, host=, pid= lines",
                            ", heartbeat ", static_cast<long>(held.heartbeat_age_s), " s ago): if no job uses ckpt.dir, remove "
                            "it and rerun; otherwise it is taken over once it has had no heartbeat for ",
                            static_cast<long>(stale_after_s), " s"));
    if (why.empty())
      throw ConfigError(cat("ckpt.dir=", ckpt_dir.string(), " is in use by another job: ", held.holder.describe(),
                            " (lock file ", lock.string(), ", heartbeat ", static_cast<long>(held.heartbeat_age_s),
                            " s ago). Two jobs writing one ckpt.dir would rotate and overwrite each other's checkpoints: "
                            "wait for that job to end or give this run another ckpt.dir. If that job is gone, its lock "
                            "is taken over once it has had no heartbeat for ", static_cast<long>(stale_after_s),
                            " s (or remove ", lock.string(), " yourself)"));
    if (now && remove_stale(ckpt_dir, lock, held.text, *now)) {
      log::warn(cat("taking over the lock of ckpt.dir=", ckpt_dir.string(), " from ", held.holder.describe(), ": ", why));
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // another job is taking it over
  }
  throw ConfigError(cat("could not take the lock ", lock.string(), ": other jobs keep taking it; run one job per ckpt.dir"));
}

DirLock::DirLock(fs::path path, LockHolder me, double heartbeat_s)
    : path_(std::move(path)), me_(std::move(me)), beat_(std::make_unique<Beat>()) {
  if (heartbeat_s <= 0) return;
  // The thread sees copies and the heap-held stop flag, never `this`: a DirLock may be moved.
  thread_ = std::thread([path = path_, me = me_, beat = beat_.get(), heartbeat_s] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals are for the training thread's handlers
    bool warned = false;
    std::unique_lock<std::mutex> hold(beat->mutex);
    while (!beat->wake.wait_for(hold, std::chrono::duration<double>(heartbeat_s), [beat] { return beat->stop; })) {
      if (!heartbeat(path, me) && !warned) {
        warned = true;
        log::warn_any_rank(cat("the lock ", path.string(), " is no longer this job's (",
                               DirLock::lost_reason(path.parent_path()), "): no further checkpoint will be written"));
      }
    }
  });
}

DirLock::DirLock(DirLock&& other) noexcept
    : path_(std::move(other.path_)), me_(std::move(other.me_)), beat_(std::move(other.beat_)),
      thread_(std::move(other.thread_)) {}

DirLock::~DirLock() {
  if (!beat_) return;  // moved from
  {
    std::lock_guard<std::mutex> hold(beat_->mutex);
    beat_->stop = true;
  }
  beat_->wake.notify_all();
  if (thread_.joinable()) thread_.join();
  if (read_all(path_) == me_.text()) ::unlink(path_.c_str());  // never remove a lock another job took over
}

bool DirLock::heartbeat(const fs::path& lock_file, const LockHolder& me) {
  if (read_all(lock_file) != me.text()) return false;
  // NULL times: "now" by the file server's clock (NFS: SETATTR to server time), which readers compare with.
  return ::utimensat(AT_FDCWD, lock_file.c_str(), nullptr, 0) == 0;
}

std::string DirLock::lost_reason(const fs::path& ckpt_dir) {
  const fs::path lock = ckpt_dir / kLockFile;
  const std::string text = read_all(lock);
  if (text.empty()) return cat("its lock file ", lock.string(), " is gone: removed by hand?");
  const LockHolder h = LockHolder::parse(text), me = LockHolder::this_process();
  if (h.host == me.host && h.pid == me.pid && h.pid_ns == me.pid_ns) return "";
  return cat("its lock file ", lock.string(), " now names ", h.describe(),
             ", which took it over (was this job stopped for longer than ", static_cast<long>(kStaleAfterS), " s?)");
}

}  // namespace zt::ckpt
