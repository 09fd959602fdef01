// The debug.* faults. A hang sleeps forever: its peers' watchdog (dist.timeout_s) must end the job.
#include "train/faults.hpp"

#include <chrono>
#include <csignal>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"

namespace zt::train {

void inject_faults(const config::DebugConfig& debug, int rank, std::int64_t completed_step) {
  if (rank != debug.rank) return;
  if (debug.fail_at_step > 0 && completed_step == debug.fail_at_step)
    throw Error(cat("debug.fail_at_step=", debug.fail_at_step, ": injected failure after step ", completed_step,
                    " (TEST ONLY: remove the debug.* keys for real runs)"));
  if (debug.hang_at_step > 0 && completed_step == debug.hang_at_step) {
    log::warn_any_rank(cat("debug.hang_at_step=", completed_step, ": hanging on purpose (TEST ONLY)"));
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (debug.kill_at_step > 0 && completed_step == debug.kill_at_step) {
    log::warn_any_rank(cat("debug.kill_at_step=", completed_step, ": SIGKILL on purpose (TEST ONLY)"));
    std::raise(SIGKILL);
  }
}

}  // namespace zt::train
