// The nodes' ring exchanges and the slow-link rule (see link_check.hpp).
#include "health/link_check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.hpp"
#include "core/log.hpp"
#include "dist/pair_exchange.hpp"

namespace zt::health {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Edge j in round j % 2; with an odd count the last edge (n-1, 0) would meet node 0 twice in round 0.
int round_of_edge(int n, int j) { return n % 2 == 1 && j == n - 1 ? 2 : j % 2; }

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
double lesser(double a, double b) { return std::isnan(a) ? b : std::isnan(b) ? a : std::min(a, b); }
}  // namespace

int link_rounds(int n_nodes) { return n_nodes < 3 ? 0 : n_nodes % 2 == 0 ? 2 : 3; }

int link_partner(int n_nodes, int round, int node) {
  if (n_nodes < 3) return -1;
  const int prev = (node + n_nodes - 1) % n_nodes;  // edge `prev` joins it with node prev
  if (round_of_edge(n_nodes, node) == round) return (node + 1) % n_nodes;
  if (round_of_edge(n_nodes, prev) == round) return prev;
  return -1;
}

LinkTimes link_times(const std::vector<double>& prev_ms, const std::vector<double>& next_ms) {
  const std::size_t n = next_ms.size();
  ZT_CHECK_EQ(prev_ms.size(), n, "link times per node");
  std::vector<double> edge(n);  // edge j: node j with node j+1
  for (std::size_t j = 0; j < n; ++j) edge[j] = lesser(next_ms[j], prev_ms[(j + 1) % n]);
  LinkTimes t;
  for (std::size_t x = 0; x < n; ++x) t.node_ms.push_back(lesser(edge[x], edge[(x + n - 1) % n]));
  std::vector<double> measured;
  for (double v : t.node_ms)
    if (!std::isnan(v)) measured.push_back(v);
  t.median_ms = median_of(measured);
  return t;
}

LinkRule::LinkRule(int n_nodes, double fraction, std::int64_t windows)
    : fraction_(fraction), windows_(windows), runs_(static_cast<std::size_t>(n_nodes)) {}

std::vector<LinkRule::Due> LinkRule::observe(std::int64_t first_step, const LinkTimes& t) {
  ZT_CHECK_EQ(t.node_ms.size(), runs_.size(), "link times per node");
  std::vector<Due> due;
  for (std::size_t x = 0; x < runs_.size(); ++x) {
    const double ms = t.node_ms[x];
    if (!(ms > (1 + fraction_) * t.median_ms && ms - t.median_ms >= kLinkSlowMs)) {
      runs_[x] = {};
      continue;
    }
    if (runs_[x].windows++ == 0) runs_[x].first_step = first_step;
    if (runs_[x].windows == windows_) due.push_back({static_cast<int>(x), runs_[x].first_step});
  }
  return due;
}

LinkCheck::LinkCheck(const dist::World& world, double fraction, std::int64_t windows, dist::CollectiveRing* ring)
    : world_(world), ring_(ring), windows_(windows), rule_(0, fraction, windows) {
  if (world.n_nodes() < 3) return;  // the same on every rank (an all-reduce at start-up)
  // Every rank's host on every rank; a node is a host (ranks of one node need not be consecutive).
  std::string joined;
  for (const std::string& h : world.gather_to_root(world.host(), "start-up: the host of every rank (link check)"))
    joined += h + "\n";
  std::istringstream lines(world.broadcast_from_root(joined, "start-up: the host of every rank (link check)"));
  for (std::string h; std::getline(lines, h);) {
    const auto seen = std::find(hosts_.begin(), hosts_.end(), h);
    node_of_.push_back(seen == hosts_.end() ? static_cast<int>(leaders_.size()) : node_of_[static_cast<std::size_t>(seen - hosts_.begin())]);
    if (seen == hosts_.end()) leaders_.push_back(static_cast<int>(hosts_.size()));
    hosts_.push_back(h);
  }
  ZT_CHECK_EQ(hosts_.size(), static_cast<std::size_t>(world.size()), "hosts of the ranks");
  const int me = node_of_[static_cast<std::size_t>(world.rank())];
  if (leaders_[static_cast<std::size_t>(me)] == world.rank()) my_node_ = me;
  send_.assign(kLinkBytes / sizeof(float), 1.0f), recv_.resize(send_.size());
  rule_ = LinkRule(n_nodes(), fraction, windows);
  if (world.is_root() && active())
    log::info(cat("link check: each logged window the ", n_nodes(), " nodes' first ranks time a ", kLinkBytes,
                  "-byte exchange with their neighbouring nodes; a node slower than the median node by ",
                  std::lround(100 * fraction), "% and ", kLinkSlowMs, " ms for ", windows, " windows is warned about"));
}

double LinkCheck::timed_exchange(int peer_node, std::int64_t step) {
  const int peer = leaders_[static_cast<std::size_t>(peer_node)];
  const std::string what = cat("step ", step, ": link check with ", host_of(peer_node), " (rank ", peer, ")");
  const dist::RingScope recorded(ring_, dist::CollGroup::kP2p, dist::CollKind::kSend, 3 * kLinkBytes, what);
  const double timeout = world_.timeout_s();
  try {
    dist::exchange_with(world_, peer, send_.data(), recv_.data(), send_.size(), timeout);  // lines the pair up
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 2; ++i) dist::exchange_with(world_, peer, send_.data(), recv_.data(), send_.size(), timeout);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  } catch (const CommError& e) {
    throw CommError(cat(what, ": ", e.what()));
  }
}

std::pair<double, double> LinkCheck::measure(std::int64_t step) {
  double prev = kNaN, next = kNaN;
  const int n = n_nodes();
  if (my_node_ < 0 || !active()) return {prev, next};
  for (int round = 0; round < link_rounds(n); ++round) {
    const int partner = link_partner(n, round, my_node_);
    if (partner < 0) continue;
    const double ms = timed_exchange(partner, step);
    (partner == (my_node_ + 1) % n ? next : prev) = ms;
  }
  return {prev, next};
}

std::string LinkCheck::ranks_of(int node) const {
  std::string list;
  int count = 0;
  for (std::size_t r = 0; r < node_of_.size(); ++r)
    if (node_of_[r] == node) list += cat(count++ ? ", " : "", r);
  return cat(count == 1 ? "rank " : "ranks ", list);
}

LinkSummary LinkCheck::judge(std::int64_t first_step, std::int64_t last_step, const std::vector<double>& prev_ms,
                             const std::vector<double>& next_ms) {
  std::vector<double> prev(leaders_.size()), next(leaders_.size());
  for (std::size_t x = 0; x < leaders_.size(); ++x)  // each node's first rank measured its links
    prev[x] = prev_ms[static_cast<std::size_t>(leaders_[x])], next[x] = next_ms[static_cast<std::size_t>(leaders_[x])];
  const LinkTimes t = link_times(prev, next);
  const int worst = static_cast<int>(std::max_element(t.node_ms.begin(), t.node_ms.end()) - t.node_ms.begin());
  for (const LinkRule::Due& d : rule_.observe(first_step, t))
    log::warn(slow_link_message(host_of(d.node), ranks_of(d.node), windows_, d.first_step, last_step,
                                t.node_ms[static_cast<std::size_t>(d.node)], t.median_ms));
  return {host_of(worst), t.node_ms[static_cast<std::size_t>(worst)], t.median_ms};
}

std::string slow_link_message(const std::string& host, const std::string& ranks, std::int64_t windows,
                              std::int64_t first_step, std::int64_t last_step, double node_ms, double median_ms) {
  char times[96];
  std::snprintf(times, sizeof times, "%.1f ms against the median node's %.2f ms", node_ms, median_ms);
  return cat("the link of node ", host, " (", ranks, ") is slow: its ", kLinkBytes, "-byte exchanges with both ",
             "neighbouring nodes were slow for ", windows, " logged windows (steps ", first_step, "-", last_step,
             "; now ", times, "): a degraded cable, port or NIC, or a congested switch; every collective ",
             "crossing it waits. Training goes on; ztrain --preflight measures the node pairs (see \"Running on a cluster\")");
}

}  // namespace zt::health
