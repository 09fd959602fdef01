// Straggler summary and the persistence rule (see stragglers.hpp).
#include "train/stragglers.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "core/log.hpp"

namespace zt::train {
namespace {
double median(std::vector<double> v) {
  const std::size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (n % 2 == 1) return v[mid];
  const double upper = v[mid];
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2;
}
}  // namespace

WindowSummary summarize(const WindowTimes& times) {
  ZT_CHECK(!times.compute_ms.empty() && times.compute_ms.size() == times.wait_ms.size(), "straggler times per rank");
  WindowSummary s;
  const auto slowest = std::max_element(times.compute_ms.begin(), times.compute_ms.end());
  s.slowest_rank = static_cast<int>(slowest - times.compute_ms.begin());
  s.slowest_compute_ms = *slowest;
  s.slowest_wait_ms = times.wait_ms[static_cast<std::size_t>(s.slowest_rank)];
  s.median_compute_ms = median(times.compute_ms);
  s.median_wait_ms = median(times.wait_ms);
  return s;
}

StragglerRule::StragglerRule(int n_ranks, double fraction, std::int64_t windows)
    : fraction_(fraction), windows_(windows), runs_(static_cast<std::size_t>(n_ranks)) {}

std::vector<StragglerEpisode> StragglerRule::observe(std::int64_t first_step, std::int64_t last_step,
                                                     const std::vector<double>& compute_ms) {
  ZT_CHECK_EQ(compute_ms.size(), runs_.size(), "straggler times per rank");
  const double med = median(compute_ms);
  std::vector<StragglerEpisode> due;
  for (std::size_t r = 0; r < runs_.size(); ++r) {
    Run& run = runs_[r];
    // A median of 0 (nothing timed) makes every rank "slower": no verdict from such a window.
    if (!(med > 0) || !(compute_ms[r] > (1 + fraction_) * med)) {
      run = {};
      continue;
    }
    if (run.windows == 0) run.first_step = first_step;
    ++run.windows;
    run.ratio_sum += compute_ms[r] / med;
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

StragglerWatch::StragglerWatch(const dist::World& world, const config::LogConfig& log)
    : world_(world), hosts_(world.gather_to_root(world.host(), "start-up: the host of every rank")),
      rule_(world.size(), log.straggler_fraction, log.straggler_windows) {}

void StragglerWatch::observe(std::int64_t first_step, std::int64_t last_step, double compute_ms, double wait_ms,
                             StepMetrics& m) {
  if (world_.size() == 1) return;  // the same on every rank: all join the gather below or none
  const double mine[2] = {compute_ms, wait_ms};
  const std::vector<std::string> all = world_.gather_to_root(
      std::string(reinterpret_cast<const char*>(mine), sizeof mine), cat("step ", last_step, ": gathering straggler times"));
  if (!world_.is_root()) return;
  WindowTimes times;
  for (const std::string& bytes : all) {
    ZT_CHECK_EQ(bytes.size(), sizeof mine, "straggler times from a rank");
    double theirs[2];
    std::memcpy(theirs, bytes.data(), sizeof theirs);
    times.compute_ms.push_back(theirs[0]);
    times.wait_ms.push_back(theirs[1]);
  }
  const WindowSummary s = summarize(times);
  m.slowest_rank = s.slowest_rank;
  m.slowest_host = hosts_[static_cast<std::size_t>(s.slowest_rank)];
  m.slowest_compute_ms = s.slowest_compute_ms, m.median_compute_ms = s.median_compute_ms;
  m.slowest_wait_ms = s.slowest_wait_ms, m.median_wait_ms = s.median_wait_ms;
  for (const StragglerEpisode& e : rule_.observe(first_step, last_step, times.compute_ms))
    log::warn(straggler_message(e, hosts_[static_cast<std::size_t>(e.rank)]));
}

}  // namespace zt::train
