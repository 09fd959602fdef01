// The lock that keeps two jobs from writing one ckpt.dir (each would rotate and overwrite the other's
// checkpoints). It must work on the file systems clusters share ckpt.dir on (Lustre, GPFS, NFS), where
// fcntl/flock locks are absent, local to a node, or left held by a dead client; so it is a file:
//   - taken by link()ing a uniquely named, complete file to ckpt.dir/ztrain.lock: link is atomic on all
//     of them (the classic NFS-safe lock file), and the lock appears with its content, never half-written;
//   - kept alive by a heartbeat: a thread touches its mtime every kHeartbeatS, since nothing else can
//     tell a live holder on another node from a dead one;
//   - stale, and taken over with a warning, when its holder is gone: the same host (and pid namespace)
//     and the pid is dead, the same batch job id as ours (a Slurm requeue: the old process was ended
//     first), or no heartbeat for stale_after_s (mtimes compared with a file just written beside it,
//     so both are the file server's clock, never two nodes' clocks).
#pragma once

#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace zt::ckpt {

inline const char* const kLockFile = "ztrain.lock";
constexpr double kHeartbeatS = 15;
// Many heartbeats: NFS attribute caches may show another client an mtime up to 60 s old, and a
// scheduler may suspend (SIGSTOP) a job for a while without it being gone.
constexpr double kStaleAfterS = 300;
// mpirun returns when a job fails while its ranks are still being killed (SIGTERM, then SIGKILL about
// a second later), so a rerun started at once may find the old holder alive for a moment.
constexpr double kDyingGraceS = 10;

// Who holds (or wants) the lock; written into the lock file as `key=value` lines.
struct LockHolder {
  std::string job = "none";  // SLURM_JOB_ID, else PBS_JOBID, else "none"
  std::string host;
  long pid = 0;
  std::string pid_ns;        // the pid namespace (containers): a pid means something only within it
  std::string since;         // UTC, ISO 8601
  static LockHolder this_process();
  std::string text() const;
  static LockHolder parse(const std::string& text);  // missing fields stay empty / 0
  std::string describe() const;                       // job J, host H, pid P, since S
};

class DirLock {
 public:
  // Takes ckpt_dir/ztrain.lock for `me` (creating ckpt_dir), taking over a stale one with a warning
  // naming the old holder. Throws ConfigError (exit 2) naming the holder if another job holds it.
  // heartbeat_s <= 0: no heartbeat thread (tests call heartbeat() themselves). A live holder on this
  // host is watched for dying_grace_s before the refusal: a job that just failed may still be dying.
  static DirLock acquire(const std::filesystem::path& ckpt_dir, const LockHolder& me,
                         double stale_after_s = kStaleAfterS, double heartbeat_s = kHeartbeatS,
                         double dying_grace_s = kDyingGraceS);
  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&&) = delete;
  DirLock(const DirLock&) = delete;
  ~DirLock();  // releases: removes the lock file if it is still ours

  const std::filesystem::path& path() const { return path_; }
  // Refreshes the lock file's mtime if it is still ours; false if another job has taken it over.
  bool heartbeat() const { return heartbeat(path_, me_); }
  static bool heartbeat(const std::filesystem::path& lock_file, const LockHolder& me);

  // "" if ckpt_dir's lock file names this process (host, pid namespace, pid); else what happened to it.
  // The checkpointer asks before every save, so a job whose lock was taken over never writes.
  static std::string lost_reason(const std::filesystem::path& ckpt_dir);

 private:
  DirLock(std::filesystem::path path, LockHolder me, double heartbeat_s);

  std::filesystem::path path_;
  LockHolder me_;
  struct Beat {
    std::mutex mutex;
    std::condition_variable wake;
    bool stop = false;
  };
  std::unique_ptr<Beat> beat_;
  std::thread thread_;
};

}  // namespace zt::ckpt
