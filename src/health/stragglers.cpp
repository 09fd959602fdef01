// Straggler summary and the persistence rule (see stragglers.hpp).
#include "health/stragglers.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "core/error.hpp"
#include "core/log.hpp"

namespace zt::health {
namespace {
double median(std::vector<double> v) {
  const std::size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (n % 2 == 1) return v[mid];
  const double upper = v[mid];
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2;
}
}  // namespace

namespace {
// Each rank's peer median of `values` (groups empty: every rank's); NaN for a rank without peers.
std::vector<double> peer_medians(const std::vector<double>& values, const PeerGroups& groups) {
  if (groups.empty()) return std::vector<double>(values.size(), median(values));
  ZT_CHECK_EQ(groups.size(), values.size(), "straggler peer groups per rank");
  std::map<int, std::vector<double>> by_group;
  for (std::size_t r = 0; r < values.size(); ++r) by_group[groups[r]].push_back(values[r]);
  std::vector<double> out(values.size());
  for (std::size_t r = 0; r < values.size(); ++r) {
    const std::vector<double>& peers = by_group[groups[r]];
    out[r] = peers.size() > 1 ? median(peers) : std::nan("");
  }
  return out;
}
}  // namespace

PeerGroups stage_groups(int world, int pp) {
  if (pp <= 1) return {};
  PeerGroups groups(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) groups[static_cast<std::size_t>(r)] = r / (world / pp);
  return groups;
}

WindowSummary summarize(const WindowTimes& times, const PeerGroups& groups) {
  ZT_CHECK(!times.compute_ms.empty() && times.compute_ms.size() == times.wait_ms.size(), "straggler times per rank");
  const std::vector<double> compute_median = peer_medians(times.compute_ms, groups);
  const std::vector<double> wait_median = peer_medians(times.wait_ms, groups);
  std::size_t slowest = 0;
  double worst = -1;
  for (std::size_t r = 0; r < times.compute_ms.size(); ++r) {
    const double ratio = compute_median[r] > 0 ? times.compute_ms[r] / compute_median[r] : 1.0;  // no peers: 1x
    if (ratio > worst) worst = ratio, slowest = r;
  }
  WindowSummary s;
  s.slowest_rank = static_cast<int>(slowest);
  s.slowest_compute_ms = times.compute_ms[slowest];
  s.slowest_wait_ms = times.wait_ms[slowest];
  const bool peers = !std::isnan(compute_median[slowest]);  // else it is its own median
  s.median_compute_ms = peers ? compute_median[slowest] : s.slowest_compute_ms;
  s.median_wait_ms = peers ? wait_median[slowest] : s.slowest_wait_ms;
  return s;
}

StragglerRule::StragglerRule(int n_ranks, double fraction, std::int64_t windows, PeerGroups groups)
    : fraction_(fraction), windows_(windows), runs_(static_cast<std::size_t>(n_ranks)), groups_(std::move(groups)) {}

std::vector<StragglerEpisode> StragglerRule::observe(std::int64_t first_step, std::int64_t last_step,
                                                     const std::vector<double>& compute_ms) {
  ZT_CHECK_EQ(compute_ms.size(), runs_.size(), "straggler times per rank");
  const std::vector<double> med = peer_medians(compute_ms, groups_);
  std::vector<StragglerEpisode> due;
  for (std::size_t r = 0; r < runs_.size(); ++r) {
    Run& run = runs_[r];
    // A median of 0 (nothing timed) or NaN (no peers) makes no verdict.
    if (!(med[r] > 0) || !(compute_ms[r] > (1 + fraction_) * med[r])) {
      run = {};
      continue;
    }
    if (run.windows == 0) run.first_step = first_step;
    ++run.windows;
    run.ratio_sum += compute_ms[r] / med[r];
    if (run.windows == windows_)  // once per episode: later windows of the same run count past it
      due.push_back({static_cast<int>(r), run.windows, run.first_step, last_step,
                     run.ratio_sum / static_cast<double>(run.windows) - 1});
  }
  return due;
}

std::string straggler_message(const StragglerEpisode& e, const std::string& host) {
  return cat("rank ", e.rank, " on host ", host, " computed ", std::lround(100 * e.slower_fraction),
             "% slower than the median for ", e.windows, " logged windows (steps ", e.first_step, "-", e.last_step,
             "): a slow GPU/CPU, thermal throttling or a noisy neighbour; every other rank waits for it in "
             "each collective. ztrain --preflight measures it (see \"Running on a cluster\")");
}

StragglerWatch::StragglerWatch(const dist::World& world, const config::LogConfig& log, int pp, dist::CollectiveRing* ring)
    : world_(world), hosts_(world.gather_to_root(world.host(), "start-up: the host of every rank")),
      groups_(stage_groups(world.size(), pp)), rule_(world.size(), log.straggler_fraction, log.straggler_windows, groups_),
      links_(world, log.straggler_fraction, log.straggler_windows, ring) {
  if (pp > 1)
    log::info(cat("stragglers: each rank's compute is compared with the other ranks of its pipeline stage (the stages' ",
                  "work differs)", world.size() == pp ? "; with one rank per stage there are none, so no rank is judged" : ""));
}

std::optional<WindowSummary> StragglerWatch::observe(std::int64_t first_step, std::int64_t last_step, double compute_ms,
                                                     double wait_ms) {
  if (world_.size() == 1) return std::nullopt;  // the same on every rank: all join the gather below or none
  const auto [prev_ms, next_ms] = links_.measure(last_step);  // returns at once but on the nodes' first ranks
  const double mine[4] = {compute_ms, wait_ms, prev_ms, next_ms};
  const std::vector<std::string> all = world_.gather_to_root(
      std::string(reinterpret_cast<const char*>(mine), sizeof mine), cat("step ", last_step, ": gathering straggler times"));
  if (!world_.is_root()) return std::nullopt;
  WindowTimes times;
  std::vector<double> prev, next;
  for (const std::string& bytes : all) {
    ZT_CHECK_EQ(bytes.size(), sizeof mine, "straggler times from a rank");
    double theirs[4];
    std::memcpy(theirs, bytes.data(), sizeof theirs);
    times.compute_ms.push_back(theirs[0]);
    times.wait_ms.push_back(theirs[1]);
    prev.push_back(theirs[2]), next.push_back(theirs[3]);
  }
  for (const StragglerEpisode& e : rule_.observe(first_step, last_step, times.compute_ms))
    log::warn(straggler_message(e, host(e.rank)));
  WindowSummary s = summarize(times, groups_);
  if (links_.active()) s.link = links_.judge(first_step, last_step, prev, next);
  return s;
}

}  // namespace zt::health
