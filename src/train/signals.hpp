// Stop requests by signal (docs/INTERFACE.md "Signals and stopping"): SIGUSR1 (what `sbatch
// --signal=B:USR1@N` sends and mpirun forwards), SIGTERM and SIGINT (Ctrl-C on a run without mpirun; a
// second one ends it at once) only set a flag; the loop reads it at step boundaries, agrees on it over all
// ranks, checkpoints and exits 75. The only place that knows signals.
#pragma once

#include <chrono>
#include <string>

namespace zt::train {

// Installs the handlers (idempotent). They stay installed for the rest of the process: a second
// signal arriving while the process checkpoints or shuts down must not kill it half-way. ztrain installs
// them first thing, so a signal during start-up (the lock, a resume's verification, the preflight) is a
// stop request too, not the default action's death.
void install_stop_signal_handlers();
// For a command that saves nothing (--plan, --print-config, --help): the signals' default action again,
// so a stop ends it at once (a layout search may take seconds); one received before ends it now.
void restore_default_stop_signals();
// The last stop signal received (SIGUSR1, SIGTERM or SIGINT), or 0 if none.
int stop_signal_received();
// When the process started (the first call: ztrain makes it first thing), where train.time_limit_min
// counts from: a job script's margin covers its start-up too.
std::chrono::steady_clock::time_point process_started();
// Blocks the stop signals in the calling thread, so they are delivered to the training thread and
// never interrupt a background writer's system calls.
void block_stop_signals_in_this_thread();
// "SIGUSR1", "SIGTERM", ...
const char* signal_name(int signal);

// While one exists, a stop signal is reported at once on stderr (write(2), from the handler): a save
// is not interrupted, but a launcher may follow its SIGTERM with SIGKILL (mpirun after 2 x
// odls_base_sigkill_timeout, Slurm after KillWait), and a save killed then must not die silently.
class SaveNotice {
 public:
  SaveNotice(int rank, const std::string& checkpoint);
  ~SaveNotice();
  SaveNotice(const SaveNotice&) = delete;
  SaveNotice& operator=(const SaveNotice&) = delete;
};

}  // namespace zt::train
