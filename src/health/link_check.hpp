// A slow link between nodes, found while training (issue 35). A slow link makes every collective that
// crosses it slow, so every rank waits alike and the compute times of stragglers.hpp show nothing. So,
// each logged window, the nodes' first ranks time a small exchange with their two neighbours on a ring
// of the nodes (node x with x-1 and x+1; disjoint pairs at once, two rounds, three for an odd count).
// A node is as slow as the FASTER of its two links: a slow node's both links are slow, while its
// neighbours each keep one good link, so only the node at fault stands out; the reference is the
// median node. Needs 3 or more nodes (with 2 neither end can be blamed); with fewer nothing runs.
// Each exchange: one untimed (it lines the pair up), then two timed back to back, which take one
// round trip on both ends whichever arrived first. Costs 3 x 2 exchanges of kLinkBytes each way per
// node's first rank per logged window; latency, not bandwidth (--preflight measures that).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dist/collective_ring.hpp"
#include "dist/world.hpp"

namespace zt::health {

constexpr std::size_t kLinkBytes = 4096;  // each way: latency-bound on a healthy link
// A node's link is slow when its time is above (1 + log.straggler_fraction) x the median node's AND at
// least this much above it: a healthy exchange takes tens of microseconds, so the jitter of a busy
// host (a rank descheduled for a few ms) would pass a relative rule alone.
constexpr double kLinkSlowMs = 10.0;

// The ring's rounds: edge j joins node j and node j+1 (mod n); in round r node x meets link_partner(n,
// r, x), or no one (-1). Every edge meets once over link_rounds(n) rounds; a round's pairs are disjoint.
int link_rounds(int n_nodes);
int link_partner(int n_nodes, int round, int node);

// From each node's two measured exchanges, ms (prev_ms[x]: with node x-1, next_ms[x]: with node x+1):
// an edge's time is the lesser of its two ends' measurements, a node's the lesser of its two edges',
// and the median over the nodes the reference.
struct LinkTimes {
  std::vector<double> node_ms;  // per node
  double median_ms = 0;
};
LinkTimes link_times(const std::vector<double>& prev_ms, const std::vector<double>& next_ms);

// The "persistently slow" rule over consecutive windows, per node: a pure state machine fed on rank 0
// once per logged window. observe() returns the nodes that reach `windows` consecutive slow windows now
// (once per episode; a window back under the threshold ends it), with the first step of their run.
class LinkRule {
 public:
  LinkRule(int n_nodes, double fraction, std::int64_t windows);
  struct Due {
    int node = 0;
    std::int64_t first_step = 0;
  };
  std::vector<Due> observe(std::int64_t first_step, const LinkTimes& t);

 private:
  struct Run {
    std::int64_t windows = 0, first_step = 0;
  };
  double fraction_;
  std::int64_t windows_;
  std::vector<Run> runs_;
};

// The window's verdict for the metrics line: the node with the slowest links, its time and the median's.
struct LinkSummary {
  std::string host;
  double slowest_ms = 0, median_ms = 0;
};

// Both sides of the check. Every rank constructs it (a collective: learns every rank's host) and
// calls measure() at the same point each logged window; rank 0 then judges the gathered times.
class LinkCheck {
 public:
  LinkCheck(const dist::World& world, double fraction, std::int64_t windows, dist::CollectiveRing* ring);
  int n_nodes() const { return static_cast<int>(leaders_.size()); }
  bool active() const { return n_nodes() >= 3; }  // the same on every rank

  // This rank's part of the window's exchanges: {with the previous node, with the next}, ms; NaN on a
  // rank that is not its node's first (those return at once). Each exchange is recorded in the ring
  // (the hang report's flight recorder) and ends within dist.timeout_s, else throws CommError.
  std::pair<double, double> measure(std::int64_t step);

  // Rank 0: every rank's measure() (prev_ms, next_ms per rank) for the window of steps
  // first_step..last_step. Warns about a node slow for log.straggler_windows windows (once per episode).
  LinkSummary judge(std::int64_t first_step, std::int64_t last_step, const std::vector<double>& prev_ms,
                    const std::vector<double>& next_ms);

  // "rank 4" / "ranks 4, 5": the ranks of node x.
  std::string ranks_of(int node) const;
  const std::string& host_of(int node) const { return hosts_[static_cast<std::size_t>(leaders_[static_cast<std::size_t>(node)])]; }

 private:
  double timed_exchange(int peer_node, std::int64_t step);

  const dist::World& world_;
  dist::CollectiveRing* ring_;
  std::vector<std::string> hosts_;  // every rank's
  std::vector<int> leaders_;        // each node's first rank, nodes in the order of their first ranks
  std::vector<int> node_of_;        // each rank's node
  int my_node_ = -1;                // this rank's node if it is its first rank, else -1
  std::vector<float> send_, recv_;
  std::int64_t windows_;
  LinkRule rule_;
};

// The console warning for node `node` slow for `windows` windows (steps first_step..last_step).
std::string slow_link_message(const std::string& host, const std::string& ranks, std::int64_t windows,
                              std::int64_t first_step, std::int64_t last_step, double node_ms, double median_ms);

}  // namespace zt::health
