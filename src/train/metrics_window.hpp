// The steps since the last metrics line: their wall time, loader waits, phase times, the time blocked
// in collectives, trained targets and communicator bytes, turned into the per-step means of one
// metrics line (metrics.hpp). The trainer adds to it; close() fills the line and starts a new window.
#pragma once

#include <chrono>
#include <cstdint>

#include "train/metrics.hpp"

namespace zt::train {

struct PhaseTimes {
  double forward_ms = 0, backward_ms = 0, comm_ms = 0, optimizer_ms = 0;
  double blocked_ms = 0;  // of these, blocked in collectives (TimedCommunicator)
};

class MetricsWindow {
 public:
  // Totals that only grow (the loader's wait, the communicator's bytes) at the window's start.
  MetricsWindow(double loader_wait_ms_total, std::uint64_t comm_bytes_total);

  PhaseTimes phases;  // accumulated by the trainer's phases
  void add_step(double trained_targets) { ++steps_, trained_targets_ += trained_targets; }

  struct Closed {
    std::int64_t steps = 0;          // in the window just closed
    double blocked_ms_per_step = 0;  // time blocked in collectives, per step
  };
  // Fills m's rates and per-step means (step_ms, tokens_per_s and per rank, data_wait_ms, comm_bytes,
  // trained_tokens, the phase times) from the window and the totals now; starts the next window.
  Closed close(StepMetrics& m, double loader_wait_ms_total, std::uint64_t comm_bytes_total,
               std::int64_t tokens_per_step, int world_size);

 private:
  void start(double loader_wait_ms_total, std::uint64_t comm_bytes_total);

  std::chrono::steady_clock::time_point started_;
  double wait_at_start_ = 0;
  std::uint64_t comm_bytes_at_start_ = 0;
  std::int64_t steps_ = 0;
  double trained_targets_ = 0;  // over all ranks: targets that entered the loss
};

}  // namespace zt::train
