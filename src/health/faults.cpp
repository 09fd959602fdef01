// The debug.* faults. A hang sleeps forever (or stops or kills the process): its peers' watchdog
// (dist.timeout_s) must end the job.
#include "health/faults.hpp"

#include <chrono>
#include <csignal>
#include <thread>

#include "config/value.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace zt::health {

void inject_faults(const config::DebugConfig& debug, int rank, std::int64_t completed_step) {
  if (rank != debug.rank) return;
  if (debug.fail_at_step > 0 && completed_step == debug.fail_at_step)
    throw Error(cat("debug.fail_at_step=", debug.fail_at_step, ": injected failure after step ", completed_step,
                    " (TEST ONLY: remove the debug.* keys for real runs)"));
  hang_point(debug, rank, config::HangPhase::kStepEnd, completed_step);
  if (debug.kill_at_step > 0 && completed_step == debug.kill_at_step) {
    log::warn_any_rank(cat("debug.kill_at_step=", completed_step, ": SIGKILL on purpose (TEST ONLY)"));
    std::raise(SIGKILL);
  }
}

void hang_point(const config::DebugConfig& debug, int rank, config::HangPhase phase, std::int64_t step) {
  if (rank != debug.rank || debug.hang_at_step <= 0 || step != debug.hang_at_step || phase != debug.hang_phase) return;
  const char* how = debug.hang_mode == config::HangMode::kSigstop   ? "SIGSTOP"
                    : debug.hang_mode == config::HangMode::kSigkill ? "SIGKILL"
                                                                    : "hanging";
  log::warn_any_rank(cat("debug.hang_at_step=", step, " debug.hang_phase=", config::value::enum_name(phase), ": ", how,
                         " on purpose (TEST ONLY)"));
  if (debug.hang_mode == config::HangMode::kSigstop) std::raise(SIGSTOP);
  if (debug.hang_mode == config::HangMode::kSigkill) std::raise(SIGKILL);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // after SIGCONT too: still hung
}

bool skip_collective(const config::DebugConfig& debug, int rank, std::int64_t completed_step) {
  if (rank != debug.rank || debug.skip_collective_at_step <= 0 || completed_step != debug.skip_collective_at_step)
    return false;
  log::warn_any_rank(cat("debug.skip_collective_at_step=", completed_step,
                         ": leaving out the step boundary's all-reduce on purpose (TEST ONLY)"));
  return true;
}

void slow_point(const config::DebugConfig& debug, int rank, double elapsed_ms) {
  if (rank != debug.rank || debug.slow_rank_factor <= 1) return;
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>((debug.slow_rank_factor - 1) * elapsed_ms));
}

}  // namespace zt::health
