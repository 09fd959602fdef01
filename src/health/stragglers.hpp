// Straggler detection. Every logged window, each rank's compute time (the step's phases less the time
// blocked in collectives, dist/timed_communicator.hpp) and wait time (that blocked time + data wait) are
// gathered; rank 0 finds the slowest rank and the median. Compute time, not step time: every rank
// waits for the slowest one in the collectives, so all step times are equal and only the compute shows
// who is slow (the others' extra wait is the mirror image).
// "Persistently" slower: the same rank's compute time above (1 + log.straggler_fraction) x the median
// in log.straggler_windows consecutive logged windows. Warned once per episode; the episode ends when
// that rank is back under the threshold for a window.
// Peers: ranks are compared within a group of ranks that do the same work. Under parallel.pp the stages'
// work differs (the last one runs the LM head and the loss: GPT-2 124M's head costs ~4.5 blocks, which
// the balanced cut only partly evens out, and a FLOP count misses the softmax and the kernels' speeds), so
// a rank's peers are the ranks of its own stage (its data-parallel and tensor-parallel replicas); a
// stage of one rank has none, and gets no verdict. Without a pipeline every rank is every rank's peer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "dist/world.hpp"
#include "health/link_check.hpp"

namespace zt::health {

// One logged window of per-rank times, as rank 0 sees it after the gather.
struct WindowTimes {
  std::vector<double> compute_ms;  // per rank, mean per step
  std::vector<double> wait_ms;     // per rank, mean per step
};

struct WindowSummary {
  int slowest_rank = 0;
  double slowest_compute_ms = 0, median_compute_ms = 0;
  double slowest_wait_ms = 0, median_wait_ms = 0;
  std::optional<LinkSummary> link;  // 3 or more nodes (link_check.hpp)
};

// Which peer group each rank is in (its pipeline stage); empty: one group of all ranks.
using PeerGroups = std::vector<int>;
// The pipeline stage of every rank of a world of `world` ranks, pp stages of world / pp ranks each
// (dist::Grid: stages outermost); pp = 1: one group.
PeerGroups stage_groups(int world, int pp);

// Slowest rank: the one whose compute time is the largest multiple of its peers' median (the lowest
// rank among equals; a rank without peers is 1x), and the medians of its group (of an even count: the
// mean of the middle two). times must hold at least one rank.
WindowSummary summarize(const WindowTimes& times, const PeerGroups& groups = {});

// A warning due: `rank` has been slower than the threshold for `windows` consecutive windows covering
// steps first_step..last_step, on average `slower_fraction` above the median (0.23 = 23% slower).
struct StragglerEpisode {
  int rank = 0;
  std::int64_t windows = 0, first_step = 0, last_step = 0;
  double slower_fraction = 0;
};

// The "persistently slower" rule over consecutive windows: a pure state machine (no clocks, no MPI),
// fed on rank 0 once per logged window.
class StragglerRule {
 public:
  StragglerRule(int n_ranks, double fraction, std::int64_t windows, PeerGroups groups = {});
  // The window covering steps first_step..last_step; returns the episodes that reach `windows`
  // consecutive slow windows now (each rank's episode is reported once).
  std::vector<StragglerEpisode> observe(std::int64_t first_step, std::int64_t last_step,
                                        const std::vector<double>& compute_ms);

 private:
  struct Run {
    std::int64_t windows = 0, first_step = 0;
    double ratio_sum = 0;  // sum over the run's windows of compute / median
  };
  double fraction_;
  std::int64_t windows_;
  std::vector<Run> runs_;
  PeerGroups groups_;
};

// The console warning for an episode, naming the rank and its host.
std::string straggler_message(const StragglerEpisode& e, const std::string& host);

// The trainer's side: the hosts of all ranks (gathered once, at construction) and, per logged window,
// each rank's two times gathered onto rank 0, which summarises them (for the metrics line) and warns. The
// gather goes over the World (MPI, host memory, under its watchdog, which names a rank that never
// arrives), not the training communicator: no device buffer, nothing queued behind the step's work.
// One small message per rank per logged window. With 3 or more nodes the nodes' first ranks first time
// their links (link_check.hpp), the times travel in the same message, and rank 0 judges them too.
class StragglerWatch {
 public:
  // pp: parallel.pp (the world's pipeline stages: the peer groups); ring: the flight recorder the link
  // exchanges are recorded in (may be null). Every rank: a collective.
  StragglerWatch(const dist::World& world, const config::LogConfig& log, int pp = 1, dist::CollectiveRing* ring = nullptr);
  // Every rank calls, every logged window (steps first_step..last_step), with its mean per-step times.
  // Returns the window's summary on rank 0 of a job of more than one rank, nullopt elsewhere.
  std::optional<WindowSummary> observe(std::int64_t first_step, std::int64_t last_step, double compute_ms,
                                       double wait_ms);
  // Rank `rank`'s host (rank 0 only).
  const std::string& host(int rank) const { return hosts_[static_cast<std::size_t>(rank)]; }

 private:
  const dist::World& world_;
  std::vector<std::string> hosts_;  // rank 0 only
  PeerGroups groups_;
  StragglerRule rule_;
  LinkCheck links_;  // inactive below 3 nodes
};

}  // namespace zt::health
