// TEST ONLY fault injection (debug.* keys): on rank debug.rank, throw, hang, stop (SIGSTOP) or
// SIGKILL this process after a step or inside one phase of it, so tests can check that a job never
// hangs and that resume recovers.
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace zt::health {

// After completing step `completed_step`: debug.fail_at_step, debug.kill_at_step, and
// debug.hang_at_step with debug.hang_phase=step_end.
void inject_faults(const config::DebugConfig& debug, int rank, std::int64_t completed_step);

// The fault point of `phase` in step `step` (for resume: the step of the checkpoint loaded): on
// debug.rank, when debug.hang_at_step == step and debug.hang_phase == phase, stops responding as
// debug.hang_mode says. Any thread (a checkpoint write may run on the writer thread).
void hang_point(const config::DebugConfig& debug, int rank, config::HangPhase phase, std::int64_t step);

// debug.skip_collective_at_step on debug.rank: true at the step boundary after that step, whose
// all-reduce this rank then leaves out (a collective skipped on one rank, for the hang report's test).
bool skip_collective(const config::DebugConfig& debug, int rank, std::int64_t completed_step);

// debug.slow_rank_factor on debug.rank: after a phase that took elapsed_ms, sleeps so that it takes
// factor x as long (a straggler for the straggler test).
void slow_point(const config::DebugConfig& debug, int rank, double elapsed_ms);

}  // namespace zt::health
