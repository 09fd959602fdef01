// Async-signal-safe stop flag: the handler stores one sig_atomic_t and does nothing else.
#include "train/signals.hpp"

#include <pthread.h>

#include <csignal>
#include <cstring>

#include "core/error.hpp"

namespace zt::train {
namespace {
// A process-wide flag is the one thing a signal handler may touch (hence a global, STYLE.md §6).
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int signal) { g_stop_signal = signal; }

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_stop_signal;
  action.sa_mask = stop_signals();  // one handler at a time
  action.sa_flags = SA_RESTART;     // interrupted reads and writes resume instead of failing with EINTR
  for (int s : {SIGUSR1, SIGTERM})
    if (sigaction(s, &action, nullptr) != 0) throw Error(cat("cannot install the ", signal_name(s), " handler"));
}

int stop_signal_received() { return g_stop_signal; }

void block_stop_signals_in_this_thread() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGUSR1: return "SIGUSR1";
    case SIGTERM: return "SIGTERM";
    case 0: return "no signal";
    default: return "a signal";
  }
}

}  // namespace zt::train
