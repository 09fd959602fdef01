// Hang diagnosis: when a rank's deadline fires (dist.timeout_s), the ranks compare their flight
// recorders (dist/collective_ring.hpp) over files in ckpt.dir/diag/, a channel that does not depend on
// the stuck communicator and needs no MPI call off the main thread (the world is MPI_THREAD_FUNNELED),
// and the job prints which rank never entered, skipped or is ahead of which collective.
//
// The exchange, all in ckpt.dir/diag/ (docs/INTERFACE.md):
//   - at start-up the ranks agree on every rank's host and pid (so a rank that later stops is named
//     with its node), and rank 0 moves a previous job's diag/ to diag.previous/;
//   - the first rank whose deadline fires creates `request` (O_EXCL: exactly one reporter) holding an
//     incident token, writes its notes, and waits up to kNotesWaitS for every rank's;
//   - every rank's watcher thread polls for `request` (every kPollS) and answers with its notes: this
//     works while the rank's main thread is stuck in compute or in a collective, and never calls MPI;
//     a stopped (SIGSTOP) or dead rank sends none and is named for it;
//   - in a multi-node job each rank also listens on a TCP port (dist/reach.hpp), and each node's first
//     rank, when it answers, probes the other nodes' first ranks (kReachProbeS): the notes then say
//     which nodes answer, so a cut link or a lost node is named (the notes travel by ckpt.dir, which a
//     partitioned node may still reach);
//   - the reporter prints the summary (hang_report.hpp) and writes summary.txt; other failing ranks wait
//     for it (bounded) before they end. Rank 0 prints it too when the reporter is on another node, whose
//     output may never reach the launcher (a cut link). Then the exception goes on to the boundary
//     (MPI_Abort, exit 1).
// All writes are atomic (NAME.tmp, rename). A job of one rank has no peers and writes nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "dist/collective_ring.hpp"
#include "dist/reach.hpp"
#include "dist/world.hpp"

namespace zt::health {

class HangNotes {
 public:
  static constexpr double kNotesWaitS = 2.0;  // the reporter waits this long for the others' notes
  static constexpr double kPollS = 0.1;       // how often the watcher looks for a request

  // Collective (two world agreements): rank 0 moves a previous job's diag/ aside, every rank
  // learns every rank's host and pid. Starts the watcher thread. Creates no file: diag/ appears only
  // when a hang is reported.
  HangNotes(const dist::World& world, std::filesystem::path dir, const dist::CollectiveRing& ring);
  ~HangNotes();  // stops the watcher
  HangNotes(const HangNotes&) = delete;
  HangNotes& operator=(const HangNotes&) = delete;

  // On the main thread, when `failure` (a deadline, a communication error) ends this rank: the
  // exchange above. Returns within kNotesWaitS + 1 s; never throws.
  void report(const std::string& failure);
  // Runs f; a CommError from it (a deadline) is reported as above, then rethrown.
  template <typename F>
  auto reporting(F f) {
    try {
      return f();
    } catch (const CommError& e) {
      report(e.what());
      throw;
    }
  }

 private:
  void watch();
  std::string pending_request() const;  // the token in diag/request, or ""
  void write_notes(const std::string& incident, bool failed, const std::string& failure);
  void summarize(const std::string& incident, std::chrono::steady_clock::time_point start);  // the reporter's part
  bool wait_for_summary(const std::string& incident) const;
  std::vector<std::pair<std::string, std::string>> probe(const std::string& incident);  // (host, verdict)

  int rank_, size_;
  std::string host_;
  std::vector<std::string> known_;      // "node H (pid P)" of every rank
  std::vector<std::string> hosts_;      // every rank's host
  std::vector<std::string> endpoints_;  // every rank's ReachListener::endpoint() ("" if none)
  std::vector<int> node_first_;         // every node's first rank (local rank 0), in rank order
  std::unique_ptr<dist::ReachListener> listener_;  // multi-node jobs only
  std::string probed_incident_;         // the incident probe() last ran for, and what it found
  std::vector<std::pair<std::string, std::string>> probed_;
  std::filesystem::path dir_;
  const dist::CollectiveRing& ring_;
  std::mutex write_mutex_;
  bool failed_written_ = false;  // the main thread's failed notes are final: the watcher keeps off them
  std::string answered_;         // the watcher's last answered incident
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace zt::health
