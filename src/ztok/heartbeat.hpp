// The progress deadline of a multi-rank ztok (a rank alone writes no file). A rank's share of the tokenizing has no bound (hours
// are normal), so a fixed deadline on the waits is wrong; instead each rank proves it is alive by
// rewriting OUT/.ztok/alive.<rank> (what it is doing) from its main loop, at most every second, and
// only while that loop runs: a stopped (SIGSTOP), hung or dead rank stops rewriting it. A waiting rank
// checks its peers' files: one unchanged for timeout_s is not progressing (a slow rank still rewrites
// its file), and the waiter throws CommError naming it, which ends the job (MPI_Abort). Ages are
// measured on the file system's clock (against the mtime of the waiter's own freshly rewritten file),
// never the local clock, as the nodes' clocks may differ from the file server's.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace zt::ztok {

class Heartbeat {
 public:
  Heartbeat(std::filesystem::path out, int rank, int ranks, double timeout_s);
  // Rewrites this rank's file with `doing` ("tokenizing"), unless it was rewritten in the last
  // interval (1 s, or timeout_s / 4 if shorter) and `doing` is unchanged. Never throws: the file is
  // a signal, and OUT/.ztok may already be gone once the run is complete.
  void beat(const std::string& doing);
  // beat(doing), then throws zt::CommError naming every peer whose file has not changed for
  // timeout_s (and what it was doing). Call only while waiting for the peers.
  void check(const std::string& doing);

 private:
  std::filesystem::path file_of(int rank) const;
  std::filesystem::path out_;
  int rank_, ranks_;
  double timeout_s_, interval_s_;
  std::string doing_;
  double beat_at_ = -1;   // steady-clock seconds of the last rewrite (-1: never)
  double start_fs_ = -1;  // file-system time of this rank's first beat: older peer files (an earlier,
                          // interrupted invocation's) count from here
};

}  // namespace zt::ztok
