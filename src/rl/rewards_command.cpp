// The command reward (rewards_command.hpp): one poll loop writes a batch's lines and reads its answers
// at once, so neither side blocks on a full pipe (64 KiB) however large the batch.
#include "rl/rewards_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include "core/log.hpp"

extern char** environ;

namespace zt::rl {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kExitGraceMs = 2000;               // for the program to exit once its stdin closes
constexpr int kExitCheckMs = 200;                // how often a wait for answers checks the program is alive
constexpr std::size_t kMaxLineBytes = 1 << 20;   // an answer is a number: a longer line is a fault
constexpr std::size_t kQuoteChars = 200;         // of an offending line in an error
constexpr double kMaxScore = 1e30;               // |score|: fp32 advantages (sums, differences) stay finite
constexpr const char* kAnswerForm =
    "each answer is one line: a JSON number (1, 0.5) or an object with a numeric \"score\" ({\"score\": 1.0}); logs go to "
    "stderr, never stdout";

std::string quoted_clipped(std::string_view line) {
  if (line.size() <= kQuoteChars) return cat("`", line, "`");
  return cat("`", line.substr(0, kQuoteChars), "...` (", line.size(), " bytes)");
}

std::string json_text(const nlohmann::json& j) {
  // A response cut mid-character is invalid UTF-8: replaced (U+FFFD), never a throw mid-batch.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The batch's input lines, in order (rewards.hpp's protocol).
std::string input_lines(const std::vector<RewardInput>& batch) {
  std::string out;
  for (const RewardInput& in : batch) {
    out += "{\"prompt\":" + json_text(in.prompt);
    out += ",\"response\":" + json_text(in.response);
    out += ",\"reference\":" + json_text(in.reference);
    out += ",\"id\":" + json_text(in.id) + "}\n";
  }
  return out;
}

Error more_answers(const std::string& prefix, std::size_t n, std::string_view line) {
  return Error(cat(prefix, ": the program wrote more answers than lines: after the ", n, " answers of this batch came ",
                   quoted_clipped(line), "; it must write exactly one answer line per input line"));
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string signal_text(int sig) {
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 32)
  if (const char* abbrev = sigabbrev_np(sig)) return cat(sig, " (SIG", abbrev, ")");
#endif
  return cat(sig, " (", ::strsignal(sig), ")");
}

// Blocks SIGPIPE in this thread during a batch's exchange, so the program's exit is EPIPE here,
// not ztrain's death. No disposition changes (only train/ installs handlers); a SIGPIPE our write
// raised is taken off this thread's pending set before the old mask returns.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    const timespec zero{};
    while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_{}, old_{};
};

// Spawns `/bin/sh -c program` with stdin and stdout on the pipes, stderr ours, in a new process group
// (so a kill reaches what sh starts), with default signal handling and no other descriptor of ours.
// ztrain's environment without what the MPI launcher and library set for this rank (Open MPI's OMPI_*
// rank variables and its internal MCA ones: ess, orte_*, pmix, initial_wdir; PMIx's server and namespace;
// PMI's): a program that starts an MPI job of its own (a judge model under mpirun) would otherwise take
// itself for one of ztrain's ranks, or a singleton of it. The user's own OMPI_MCA_* settings and
// OMPI_ALLOW_RUN_AS_ROOT* stay.
bool mpi_rank_variable(std::string_view var) {
  if (var.starts_with("PMIX_") || var.starts_with("PMI_")) return true;
  if (!var.starts_with("OMPI_") || var.starts_with("OMPI_ALLOW_")) return false;
  if (!var.starts_with("OMPI_MCA_")) return true;  // OMPI_COMM_WORLD_RANK, OMPI_COMMAND, ...
  const std::string_view mca = var.substr(9);
  for (const char* internal : {"ess=", "ess_", "orte_", "pmix=", "pmix_", "initial_wdir=", "shmem_RUNTIME_QUERY_hint="})
    if (mca.starts_with(internal)) return true;
  return false;
}

std::vector<char*> program_environment() {
  std::vector<char*> out;
  for (char** e = environ; *e != nullptr; ++e)
    if (!mpi_rank_variable(*e)) out.push_back(*e);
  out.push_back(nullptr);
  return out;
}

// The shell ztrain starts: a watcher in the program's group, blocked on the life pipe (fd 3) whose only
// writer is ztrain, kills the whole group at its end: when the rank dies however it dies (SIGKILL from
// mpirun's teardown included, where no destructor runs), the program and what it started (a judge
// server holding a GPU or a port) go with it. The watcher holds none of the program's pipes; then the
// program runs in the shell's place (same pid, the group's leader).
constexpr const char* kWatchedShell =
    "(read -r x <&3; kill -KILL 0) </dev/null >/dev/null 2>&1 & exec 3<&-; exec /bin/sh -c \"$1\"";

pid_t spawn(const std::string& program, int child_in, int child_out, int life) {
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, child_in, 0);
  posix_spawn_file_actions_adddup2(&files, child_out, 1);
  posix_spawn_file_actions_adddup2(&files, life, 3);
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
  posix_spawn_file_actions_addclosefrom_np(&files, 4);  // before 2.34 only our O_CLOEXEC ones close
#endif
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  std::string sh = "sh", dash_c = "-c", watched = kWatchedShell, name = "ztrain-reward", prog = program;
  char* argv[] = {sh.data(), dash_c.data(), watched.data(), name.data(), prog.data(), nullptr};
  pid_t pid = -1;
  const std::vector<char*> env = program_environment();
  const int rc = posix_spawn(&pid, "/bin/sh", &files, &attr, argv, env.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&files);
  if (rc != 0)
    throw Error(cat("rl.reward=command:", program, ": cannot start /bin/sh -c: ", std::strerror(rc)));
  return pid;
}
}  // namespace

CommandReward::CommandReward(std::string program, double timeout_s)
    : program_(std::move(program)), timeout_s_(timeout_s) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) throw Error(cat(prefix(), ": cannot make a pipe: ", std::strerror(errno)));
  if (pipe2(out, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(in[0]), ::close(in[1]);
    throw Error(cat(prefix(), ": cannot make a pipe: ", std::strerror(err)));
  }
  int life[2];
  if (pipe2(life, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
    throw Error(cat(prefix(), ": cannot make a pipe: ", std::strerror(err)));
  }
  to_ = in[1], from_ = out[0], life_ = life[1];
  try {
    pid_ = spawn(program_, in[0], out[1], life[0]);
  } catch (...) {
    ::close(in[0]), ::close(out[1]), ::close(life[0]), close_fd(to_), close_fd(from_), close_fd(life_);
    throw;
  }
  ::close(in[0]), ::close(out[1]), ::close(life[0]);
  fcntl(to_, F_SETFL, fcntl(to_, F_GETFL) | O_NONBLOCK);
  fcntl(from_, F_SETFL, fcntl(from_, F_GETFL) | O_NONBLOCK);
}

CommandReward::~CommandReward() {
  close_fd(to_);  // end of input: the program's cue to exit
  const bool ending_here = !reaped_ && !failed_;  // (a failed program was ended, and said so, already)
  const bool in_time = reaped_ || wait_exit(kExitGraceMs);
  kill_group();  // what it started too: a helper left running holds the job's stderr (mpirun waits on it)
  close_fd(life_);  // after the kill: its end would have the watcher kill the program mid-exit
  close_fd(from_);
  if (!ending_here) return;
  if (!in_time)
    log::warn_any_rank(cat(prefix(), ": the program did not exit within ", kExitGraceMs / 1000, " s of the end of its "
                           "input, so ztrain killed it (SIGKILL to its process group): it should exit when its stdin closes"));
  else if (status_ != -1 && (WIFSIGNALED(status_) || WEXITSTATUS(status_) != 0))
    log::warn_any_rank(cat(prefix(), ": at the end of the run the program ",
                           WIFSIGNALED(status_) ? cat("was killed by signal ", signal_text(WTERMSIG(status_)))
                                                : cat("exited with status ", WEXITSTATUS(status_)),
                           " (its standard error, above, may say why); the scores it gave were used"));
}

std::string CommandReward::describe() const {
  return cat(prefix(), ": scores from the program (/bin/sh -c, pid ", pid_,
             "), JSON lines over its stdin/stdout, rl.reward_timeout_s=", timeout_s_,
             " s without progress; its stderr is ztrain's");
}

std::string CommandReward::prefix() const { return cat("rl.reward=command:", program_); }

std::vector<double> CommandReward::score(const std::vector<RewardInput>& batch) {
  if (failed_)
    throw Error(cat(prefix(), ": the program failed in an earlier batch (see that error); it is not restarted"));
  try {
    check_idle();
    return batch.empty() ? std::vector<double>{} : exchange(batch);
  } catch (...) {
    failed_ = true;  // the lines and answers may be out of step now: no later batch may trust them
    close_fd(to_);
    kill_group();
    throw;
  }
}

std::vector<double> CommandReward::exchange(const std::vector<RewardInput>& batch) {
  const std::string out = input_lines(batch);
  const std::size_t n = batch.size();
  const auto timeout = std::chrono::duration<double>(timeout_s_);
  std::vector<double> scores;
  scores.reserve(n);
  std::size_t written = 0;
  bool input_closed = false;  // the program closed its stdin (EPIPE): read on to learn how it ended
  SigpipeBlock sigpipe;
  auto progress = Clock::now();
  while (scores.size() < n) {
    const auto left = timeout - (Clock::now() - progress);
    if (left.count() <= 0) throw timed_out(scores.size(), n, written, out.size(), input_closed);
    pollfd fds[2] = {{from_, POLLIN, 0}, {to_, POLLOUT, 0}};
    const bool writing = written < out.size() && !input_closed;
    const double left_ms = std::ceil(std::chrono::duration<double, std::milli>(left).count());
    // At most kExitCheckMs a wait: a program that exited while a process it started keeps its output
    // open (no end of file comes) is seen as ended, not as slow.
    const int ready = ::poll(fds, writing ? 2 : 1, static_cast<int>(std::min(left_ms, double{kExitCheckMs})));
    if (ready < 0 && errno != EINTR) throw Error(cat(prefix(), ": poll failed: ", std::strerror(errno)));
    if (ready <= 0) {
      if (!reaped_ && exited()) {
        kill_group();  // what it started too (its group outlives it), then reaped: its own status kept
        // What it wrote before it ended; an end of file now is the kill of what held its output, not the
        // program closing it (which of the two a read sees depends on when the killed process is gone).
        read_some(scores, n, /*ended=*/true);
        if (scores.size() < n)
          throw RewardProgramEnded(cat(prefix(), ": the program ended after ", scores.size(), " of the ", n,
                                       " answers of this batch: it ", ending(), " (a process it started still holds its ",
                                       "output). Its standard error is ztrain's (above). It must answer every line, and ",
                                       "run until its input ends"));
      }
      continue;
    }
    // Answers first: what the program wrote before it died is counted and checked.
    if (fds[0].revents != 0) {
      read_some(scores, n);
      progress = Clock::now();
    }
    if (writing && fds[1].revents != 0) {
      const std::size_t before = written;
      input_closed = !write_some(out, written);
      if (written > before) progress = Clock::now();
    }
  }
  if (!pending_.empty())
    throw more_answers(prefix(), n, std::string_view(pending_).substr(0, pending_.find('\n')));
  if (written < out.size())  // its last line is not all written: it answered lines it had not read
    throw Error(cat(prefix(), ": the program wrote all ", n, " answers of this batch before reading its lines ",
                    "(ztrain had written ", written, " of their ", out.size(),
                    " bytes); it must write one answer per line it reads"));
  return scores;
}

// Writes what the pipe takes. False when the program has closed its stdin (EPIPE).
bool CommandReward::write_some(const std::string& out, std::size_t& written) {
  const ssize_t w = ::write(to_, out.data() + written, out.size() - written);
  if (w >= 0) {
    written += static_cast<std::size_t>(w);
    return true;
  }
  if (errno == EAGAIN || errno == EINTR) return true;
  if (errno == EPIPE) return false;
  throw Error(cat(prefix(), ": writing to the program failed: ", std::strerror(errno)));
}

void CommandReward::read_some(std::vector<double>& scores, std::size_t n, bool ended) {
  char buf[1 << 16];
  const ssize_t r = ::read(from_, buf, sizeof buf);
  if (r < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    throw Error(cat(prefix(), ": reading the program's answers failed: ", std::strerror(errno)));
  }
  if (r == 0) {
    if (ended) return;
    throw stopped(scores.size(), n);
  }
  pending_.append(buf, static_cast<std::size_t>(r));
  std::size_t start = 0;
  for (std::size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string_view line(pending_.data() + start, end - start);
    if (scores.size() == n)
      throw more_answers(prefix(), n, line);
    scores.push_back(parse_answer(line, scores.size(), n));
  }
  pending_.erase(0, start);
  if (pending_.size() > kMaxLineBytes)
    throw Error(cat(prefix(), ": answer ", scores.size() + 1, " of ", n, " of this batch is a line of over ",
                    kMaxLineBytes, " bytes without its end: ", quoted_clipped(pending_), "; ", kAnswerForm));
}

double CommandReward::parse_answer(std::string_view line, std::size_t index, std::size_t n) const {
  const std::string where = cat(prefix(), ": answer ", index + 1, " of ", n, " of this batch, ", quoted_clipped(line), ", ");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::out_of_range&) {  // a number beyond double's range, 1e999
    throw Error(cat(where, "is not a finite number; score with a finite number"));
  } catch (const nlohmann::json::exception&) {
    const bool nan = line.find("NaN") != line.npos || line.find("Infinity") != line.npos;
    throw Error(cat(where, "is not JSON",
                    nan ? " (NaN and Infinity, which Python's json.dumps writes, are not JSON numbers: score with a "
                          "finite number)"
                        : "",
                    "; ", kAnswerForm));
  }
  const nlohmann::json* value = &j;
  if (j.is_object()) {
    const auto it = j.find("score");
    if (it == j.end()) throw Error(cat(where, "has no \"score\"; ", kAnswerForm));
    value = &*it;
  }
  if (!value->is_number())
    throw Error(cat(where, "is ", j.is_object() ? "an object whose \"score\" is " : "", "a JSON ", value->type_name(),
                    ", not a number; ", kAnswerForm));
  const double s = value->get<double>();
  if (!std::isfinite(s)) throw Error(cat(where, "is not a finite number; score with a finite number"));
  // The advantages are computed in fp32 (and summed): a score beyond 1e30 would be an infinity there.
  if (std::abs(s) > kMaxScore)
    throw Error(cat(where, "is beyond +-", kMaxScore, ", the scores ztrain takes (its advantages are fp32); scale the scores down"));
  return s;
}

// Between batches the program owes nothing: an answer now belongs to no line (an extra answer of the
// last batch that came after its n answers were read).
void CommandReward::check_idle() {
  pollfd p{from_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return;
  char buf[kQuoteChars];
  const ssize_t r = ::read(from_, buf, sizeof buf);
  if (r > 0)  // (an end of output is left to exchange, which says how many answers came)
    throw Error(cat(prefix(), ": the program wrote ", quoted_clipped(std::string_view(buf, static_cast<std::size_t>(r))),
                    " between batches, an answer to no line: it must write exactly one answer line per input line, "
                    "and nothing else to stdout (logs go to stderr)"));
}

RewardProgramEnded CommandReward::stopped(std::size_t answered, std::size_t n) {
  return RewardProgramEnded(cat(prefix(), ": the program closed its output after ", answered, " of the ", n,
                                " answers of this batch: it ", ending(),
                                ". Its standard error is ztrain's (above). It must answer every line, and run until its "
                                "input ends"));
}

Error CommandReward::timed_out(std::size_t answered, std::size_t n, std::size_t written, std::size_t total,
                               bool input_closed) {
  close_fd(to_);
  kill_group();
  return Error(cat(prefix(), ": no progress for rl.reward_timeout_s=", timeout_s_, " s: it had answered ", answered,
                   " of the ", n, " lines of this batch, ztrain had written ", written, " of their ", total, " bytes",
                   input_closed ? " (the program closed its stdin)" : "",
                   "; ztrain killed it (SIGKILL to its process group). It must answer each line as it reads it and "
                   "flush (Python: print(score, flush=True)); if it is only slow, raise rl.reward_timeout_s"));
}

// How the program ended, for an error: it is given kExitGraceMs to exit, then killed.
std::string CommandReward::ending() {
  const bool in_time = reaped_ || wait_exit(kExitGraceMs);
  kill_group();  // what it started too; reaps it (its own status kept when it had exited)
  if (!in_time) return cat("did not exit within ", kExitGraceMs / 1000, " s, so ztrain killed it");
  if (status_ == -1) return "exited (its status is unknown: reaped elsewhere)";
  if (WIFSIGNALED(status_)) return cat("was killed by signal ", signal_text(WTERMSIG(status_)));
  const int code = WEXITSTATUS(status_);
  if (code == 127)
    return "exited with status 127, /bin/sh's \"not found\" (its message is above): check the program's name and PATH";
  if (code == 126)
    return "exited with status 126: /bin/sh found the command but could not run it (chmod +x, or name its "
           "interpreter: command:python3 FILE)";
  if (code > 128 && code < 128 + NSIG)
    return cat("exited with status ", code, " (as a shell reports its command killed by signal ",
               signal_text(code - 128), ")");
  return cat("exited with status ", code);
}

// Whether the program has exited. It is left unreaped (a zombie keeps its pid, its group's id, from
// reuse), so that kill_group can still end what it started; SIGCHLD ignored reaps it in the kernel.
bool CommandReward::exited() {
  if (reaped_) return true;
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0) return info.si_pid == pid_;
  if (errno == ECHILD) status_ = -1, reaped_ = true;
  return reaped_;
}

// Waits up to timeout_ms for the program to exit (unreaped), reading and dropping what it still writes (a
// program blocked on a full stdout pipe could never exit). Never throws.
bool CommandReward::wait_exit(int timeout_ms) {
  const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  bool eof = from_ < 0;
  while (!exited()) {
    if (Clock::now() >= end) return false;
    pollfd p{from_, POLLIN, 0};
    if (eof || ::poll(&p, 1, 10) <= 0) {
      if (eof) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    char buf[4096];
    const ssize_t r = ::read(from_, buf, sizeof buf);
    eof = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
  }
  return true;
}

// SIGKILL to the program's whole process group (sh, exited or not, and what it started), then reap sh:
// its own status when it had exited. The group is sh's pid, which cannot be reused before sh is reaped,
// so the kill reaches no stranger. Never throws.
void CommandReward::kill_group() {
  if (reaped_ || pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  status_ = r == pid_ ? status : -1;
  reaped_ = true;
}

}  // namespace zt::rl
