// An exclusive lock on an output directory for as long as a process writes it: flock() on a lock file
// there. The kernel releases it when the process ends, however it ends (a SIGKILL, an out-of-memory
// kill), so a lock never outlives its holder and a rerun needs no takeover. The file itself is left
// in place: unlinking it could let two processes lock two different files of one name.
// Where the file system has no flock (Lustre mounted without -o flock), the caller is told and runs
// unlocked rather than not at all.
#pragma once

#include <filesystem>
#include <string>

namespace zt::io {

class DirFlock {
 public:
  // Takes the lock file `lock` (created if missing; its directory must exist) without waiting.
  // Throws zt::InputError if another process holds it, naming the directory as `label` ("--out d"),
  // the holder (host, pid, since) as it wrote itself into the file, `what_for` (why two writers must
  // not share the directory) and the fix; a zt::IoError if the file cannot be opened. `unsupported` gets the reason when the file
  // system does not support the lock (then nothing is held).
  static DirFlock take(const std::filesystem::path& lock, const std::string& label, const std::string& what_for,
                        std::string& unsupported);
  DirFlock(DirFlock&& other) noexcept;
  DirFlock& operator=(DirFlock&& other) noexcept;
  DirFlock(const DirFlock&) = delete;
  DirFlock& operator=(const DirFlock&) = delete;
  ~DirFlock();  // releases it

  bool held() const { return fd_ >= 0; }

  // "host H, pid P, since T" as a holder writes itself into its lock file.
  static std::string holder_text();

 private:
  explicit DirFlock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace zt::io
