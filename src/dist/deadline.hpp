// Waiting with a deadline: the one polling loop behind the communicator's MpiWork::wait and World's
// agreements, so every host-side wait on a peer ends by its deadline (dist.timeout_s) instead of hanging.
#pragma once

#include <chrono>
#include <cmath>
#include <functional>
#include <string>

namespace zt::dist {

using Clock = std::chrono::steady_clock;

// Start-up, until step 1 completes, waits kStartUpFactor x dist.timeout_s on other ranks: its
// agreements and first collectives follow work that differs per rank (rank 0 verifying the checkpoint
// to resume, every rank loading its part of it, reading and checking its shards, building the model,
// CUDA and NCCL set-up), and a loaded machine stretches it (4 ranks on 2 busy cores arrived 3 s apart).
constexpr double kStartUpFactor = 10;
// That limit in words for the watchdog's messages: "30 s (start-up: 10 x dist.timeout_s=3 s)".
std::string start_up_limit_words(double timeout_s);

// `seconds` after `start`; never, for an infinite (or NaN) timeout or one past what the clock holds (a
// duration cast that overflows would wrap into the past: a deadline that fires at once).
inline Clock::time_point deadline_after(Clock::time_point start, double seconds) {
  if (!std::isfinite(seconds)) return Clock::time_point::max();
  if (seconds <= 0) return start;
  const double room_s = std::chrono::duration<double>(Clock::time_point::max() - start).count();
  if (seconds >= room_s - 1) return Clock::time_point::max();
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// A collective's watchdog message: "WHAT did not complete within dist.timeout_s=T s (WAITED; issued in
// ISSUED): ...". The hang report names a collective by the context it was issued in (its ring record);
// a rank may wait for it in a later one (a gradient bucket issued in a micro-batch, waited for in the
// step's gradient reduction): both are said, so the report and this line name the same phase.
std::string collective_timeout_message(const std::string& what, const std::string& limit, const std::string& issued_in,
                                       const std::string& waited_in);

// What a job aborted on a deadline can do next, after "aborting the job": the program's own words (ztrain:
// " so it can resume from the last checkpoint (ckpt.resume=auto)"; zgen, which keeps no state: none).
// Set once at start-up; "" until then.
void set_abort_advice(std::string advice);
const std::string& abort_advice();

// How a waiter spends the time between polls. Open MPI progresses nonblocking operations (libnbc
// schedules, shared-memory fragments) only inside MPI calls, so a waiter that sleeps stalls its peers'
// pipelines too: with a 1 ms back-off a 29 MB all-reduce on 4 oversubscribed ranks took 7x as long as
// MPI_Wait. So poll, yielding the core, for spin_s; after that sleep sleep_s between polls (a peer is
// then clearly late), calling between().
struct Pacing {
  double spin_s = 1.0;
  double sleep_s = 0.001;
  std::function<void()> between;  // e.g. a progress line; may be empty
};

// Calls done() until it returns true (then true) or `deadline` passes (then false). done() is always
// called at least once, so a finished operation is seen even past its deadline.
bool poll_until(Clock::time_point deadline, const std::function<bool()>& done, const Pacing& pacing = {});

}  // namespace zt::dist
