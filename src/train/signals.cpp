// Async-signal-safe stop flag: the handler stores one sig_atomic_t and does nothing else.
#include "train/signals.hpp"

#include <pthread.h>

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/error.hpp"

namespace zt::train {
namespace {
// A process-wide flag is the one thing a signal handler may touch (hence a global, docs/STYLE.md §6).
volatile std::sig_atomic_t g_stop_signal = 0;

// The report a signal during a save prints, one whole line per signal, formatted before the save (a
// handler may not format) and written with one write(2), so two ranks' lines never interleave.
volatile std::sig_atomic_t g_saving = 0;
char g_save_line_term[480], g_save_line_usr1[480], g_save_line_int[480];

void write_all(const char* text) {
  std::size_t n = std::strlen(text);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<std::size_t>(w);
  }
}

extern "C" void on_stop_signal(int signal) {
  const int saved_errno = errno;  // write(2) must not disturb the interrupted code's errno
  g_stop_signal = signal;
  if (signal == SIGINT) {  // a second Ctrl-C ends the process at once, as a terminal user expects
    struct sigaction fallback;
    std::memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigaction(SIGINT, &fallback, nullptr);  // async-signal-safe
  }
  if (g_saving) write_all(signal == SIGTERM ? g_save_line_term : signal == SIGINT ? g_save_line_int : g_save_line_usr1);
  errno = saved_errno;
}

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_stop_signal;
  action.sa_mask = stop_signals();  // one handler at a time
  action.sa_flags = SA_RESTART;     // interrupted reads and writes resume instead of failing with EINTR
  // SIGINT: a ztrain run without mpirun (a singleton) gets Ctrl-C itself (mpirun turns it into SIGTERM).
  for (int s : {SIGUSR1, SIGTERM, SIGINT})
    if (sigaction(s, &action, nullptr) != 0) throw Error(cat("cannot install the ", signal_name(s), " handler"));
}

void restore_default_stop_signals() {
  for (int s : {SIGUSR1, SIGTERM, SIGINT}) std::signal(s, SIG_DFL);
  if (const int pending = g_stop_signal; pending != 0) std::raise(pending);  // one that came before
}

int stop_signal_received() { return g_stop_signal; }

std::chrono::steady_clock::time_point process_started() {
  static const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  return started;
}

void block_stop_signals_in_this_thread() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

SaveNotice::SaveNotice(int rank, const std::string& checkpoint) {
  for (const auto& [line, name] : {std::pair{g_save_line_term, "SIGTERM"}, std::pair{g_save_line_usr1, "SIGUSR1"},
                                   std::pair{g_save_line_int, "SIGINT"}})
    std::snprintf(line, sizeof g_save_line_term,
                  "rank %d: %s during the save of checkpoint %s: finishing the save before stopping. A SIGKILL "
                  "before it is committed loses only this checkpoint; the earlier ones stay\n",
                  rank, name, checkpoint.c_str());
  g_saving = 1;
}

SaveNotice::~SaveNotice() { g_saving = 0; }

const char* signal_name(int signal) {
  switch (signal) {
    case SIGUSR1: return "SIGUSR1";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case 0: return "no signal";
    default: return "a signal";
  }
}

}  // namespace zt::train
