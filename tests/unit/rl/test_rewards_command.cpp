// rl.reward=command:PROGRAM: a user's program (small Python and sh programs written here) scores
// batches in order over JSON lines, large ones without a pipe deadlock; each way it can misbehave
// (exit, silence, bad lines, too few or too many answers) is a zt::Error (exit 1) naming the program and
// what happened; it is killed on a timeout and reaped at the end, and its death never kills us (SIGPIPE).
#include <gtest/gtest.h>

#include <chrono>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "rl/rewards.hpp"

namespace zt::rl {
namespace {

namespace fs = std::filesystem;

class CommandRewardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zt_rewards_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `python3 FILE` for a program reading the input lines as `d`, one at a time. Debian's python3
  // (tools/install-deps.sh) when there: a pyenv shim first on PATH costs ~0.5 s a start.
  std::string python(const std::string& per_line, const std::string& before = "") {
    const fs::path file = dir_ / "reward.py";
    std::ofstream(file) << "import json, sys\n" << before << "for line in sys.stdin:\n    d = json.loads(line)\n"
                        << per_line;
    const std::string python3 = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    return "command:" + python3 + " " + file.string();
  }
  std::string pid_file() const { return (dir_ / "pid").string(); }

  fs::path dir_;
};

std::vector<RewardInput> inputs(std::size_t n, std::size_t response_bytes = 0) {
  std::vector<RewardInput> batch;
  for (std::size_t i = 0; i < n; ++i)
    batch.push_back({"prompt " + std::to_string(i), std::string(response_bytes + i % 17, 'x'), "18",
                     static_cast<int>(i)});
  return batch;
}

// The expected scores of a program scoring id * 1000 + the response's length.
std::vector<double> echoed(const std::vector<RewardInput>& batch) {
  std::vector<double> s;
  for (const RewardInput& in : batch) s.push_back(in.id.get<int>() * 1000.0 + static_cast<double>(in.response.size()));
  return s;
}

// The error one batch raises: a runtime zt::Error (exit 1), not a ConfigError.
std::string failure(Reward& reward, const std::vector<RewardInput>& batch) {
  try {
    reward.score(batch);
  } catch (const ConfigError& e) {
    ADD_FAILURE() << "a ConfigError during the run: " << e.what();
    return e.what();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitRuntime);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

pid_t pid_of(const Reward& reward) {
  std::smatch m;
  const std::string d = reward.describe();
  EXPECT_TRUE(std::regex_search(d, m, std::regex("pid ([0-9]+)"))) << d;
  return m.empty() ? -1 : std::stoi(m[1]);
}

// Gone and reaped: a zombie still answers kill(pid, 0).
bool reaped(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST_F(CommandRewardTest, ScoresABatchInOrderAndKeepsOneProgramAcrossBatches) {
  const std::string spec = python("    n += 1\n    print(json.dumps({'score': d['id'] * 1000 + n, 'note': 'x'}), flush=True)\n",
                                  "n = 0\n");
  auto reward = make_reward(spec, 10);
  EXPECT_HAS(reward->describe(), spec + ": scores from the program (/bin/sh -c, pid ");
  const std::vector<RewardInput> batch = inputs(200);
  for (int round = 0; round < 2; ++round) {
    const std::vector<double> got = reward->score(batch);
    ASSERT_EQ(got.size(), batch.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], i * 1000.0 + round * 200 + i + 1) << i;
  }
  const pid_t pid = pid_of(*reward);
  reward.reset();
  EXPECT_TRUE(reaped(pid));
}

TEST_F(CommandRewardTest, PassesEveryFieldAsJsonInvalidUtf8Replaced) {
  auto reward = make_reward(python(
      "    ok = (d['prompt'] == 'p \\u00e9 \"q\"\\n' and d['response'] == 'a\\ufffdb' and d['reference'] == 'r\\tz'\n"
      "          and d['id'] == {'k': [1, 'two']})\n    print(1 if ok else 0, flush=True)\n"), 10);
  const RewardInput in{"p \xc3\xa9 \"q\"\n", "a\xff" "b", "r\tz", nlohmann::json{{"k", {1, "two"}}}};
  EXPECT_EQ(reward->score({in, in}), (std::vector<double>{1, 1}));
}

TEST_F(CommandRewardTest, ALargeBatchDoesNotDeadlockThePipes) {
  // 5000 lines of ~2 KB, ~10 MB each way (the answers echo the response) through 64 KiB pipes: writing
  // all before reading would leave both sides blocked on a full pipe.
  auto reward = make_reward(
      python("    print(json.dumps({'score': d['id'] * 1000 + len(d['response']), 'echo': d['response']}), flush=True)\n"),
      30);
  const std::vector<RewardInput> batch = inputs(5000, 2000);
  EXPECT_EQ(reward->score(batch), echoed(batch));
}

TEST_F(CommandRewardTest, AProgramThatExitsAtOnceIsNamedWithItsStatus) {
  auto reward = make_reward("command:exit 3", 10);
  const std::string e = failure(*reward, inputs(5));
  EXPECT_HAS(e, "rl.reward=command:exit 3: the program closed its output after 0 of the 5 answers of this batch: "
                "it exited with status 3");
  EXPECT_HAS(failure(*reward, inputs(5)), "failed in an earlier batch");
}

TEST_F(CommandRewardTest, AProgramNotFoundIsSaidSo) {
  const std::string e = failure(*make_reward("command:/nonexistent/zt-reward --flag", 10), inputs(3));
  EXPECT_HAS(e, "rl.reward=command:/nonexistent/zt-reward --flag");
  EXPECT_HAS(e, "status 127, /bin/sh's \"not found\"");
}

TEST_F(CommandRewardTest, AKilledProgramNamesTheSignal) {
  EXPECT_HAS(failure(*make_reward("command:kill -9 $$", 10), inputs(3)), "killed by signal 9 (SIGKILL)");
}

// A program that exits while a process it started keeps its output open never gives an end of file: it is
// named as ended, with its status, at once, not as silent after rl.reward_timeout_s.
TEST_F(CommandRewardTest, AProgramThatExitsWhileItsChildHoldsItsOutputIsNamedAtOnce) {
  auto reward = make_reward("command:sleep 30 & exit 1", 20);
  const auto start = std::chrono::steady_clock::now();
  const std::string e = failure(*reward, inputs(3));
  EXPECT_HAS(e, "the program ended after 0 of the 3 answers of this batch: it exited with status 1 (a process it "
                "started still holds its output)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "waited for the timeout";
}

TEST_F(CommandRewardTest, ItsDeathWhileWeWriteIsAnErrorNotOurSigpipe) {
  // The program closes its stdin at once and its stdout 0.3 s later: 10 MB cannot all fit the pipe, so
  // a write meets EPIPE, which must not be our death by SIGPIPE (its default, set here).
  struct sigaction default_action {}, old {};
  default_action.sa_handler = SIG_DFL;
  ASSERT_EQ(::sigaction(SIGPIPE, &default_action, &old), 0);
  auto reward = make_reward("command:exec 0<&-; sleep 0.3", 10);
  EXPECT_HAS(failure(*reward, inputs(5000, 2000)), "closed its output after 0 of the 5000 answers of this batch: it exited "
                                                   "with status 0");
  ::sigaction(SIGPIPE, &old, nullptr);
}

TEST_F(CommandRewardTest, TooFewAnswersThenAnExitCountsThem) {
  const std::string e = failure(*make_reward(python("    print(1, flush=True)\n    if d['id'] == 1: sys.exit(0)\n"), 10),
                                inputs(5));
  EXPECT_HAS(e, "closed its output after 2 of the 5 answers of this batch: it exited with status 0");
}

TEST_F(CommandRewardTest, TooManyAnswersAreRefused) {
  EXPECT_HAS(failure(*make_reward(python("    print('1\\n2', flush=True)\n"), 10), inputs(3)),
             "the program wrote more answers than lines: after the 3 answers of this batch came `");
}

TEST_F(CommandRewardTest, AnswersToLinesNotYetReadAreRefused) {
  // Three answers at once after reading one line, then no more reading: 300 KB of lines cannot all pass a
  // 64 KiB pipe. (Reading one line first: answers written before ztrain began the batch are "between
  // batches", another refusal, which a loaded machine's timing once gave here.)
  const std::string e =
      failure(*make_reward("command:read -r l; echo 1; echo 1; echo 1; exec sleep 30", 10), inputs(3, 100000));
  EXPECT_HAS(e, "the program wrote all 3 answers of this batch before reading its lines (ztrain had written ");
}

TEST_F(CommandRewardTest, LinesThatAreNotScoresAreQuoted) {
  // sh programs answering each line with `answer` (no single quote in it): a start costs ~1 ms.
  const auto with = [&](const std::string& answer) {
    return failure(*make_reward("command:while read -r l; do printf '%s\\n' '" + answer + "'; done", 10), inputs(4));
  };
  EXPECT_HAS(with("hello"), "answer 1 of 4 of this batch, `hello`, is not JSON; each answer is one line");
  EXPECT_HAS(with("\"1.0\""), "`\"1.0\"`, is a JSON string, not a number");
  EXPECT_HAS(with("true"), "`true`, is a JSON boolean, not a number");
  EXPECT_HAS(with("{\"value\": 1}"), "`{\"value\": 1}`, has no \"score\"");
  EXPECT_HAS(with("{\"score\": \"1\"}"), "is an object whose \"score\" is a JSON string, not a number");
  // What Python's json.dumps writes for float("nan") and {"score": float("inf")}.
  EXPECT_HAS(with("NaN"), "`NaN`, is not JSON (NaN and Infinity");
  EXPECT_HAS(with("{\"score\": Infinity}"), "`{\"score\": Infinity}`, is not JSON (NaN and Infinity");
  EXPECT_HAS(with("1e999"), "`1e999`, is not a finite number");
  EXPECT_HAS(with("-1e999"), "`-1e999`, is not a finite number");
  EXPECT_HAS(with(""), "answer 1 of 4 of this batch, ``, is not JSON");
  EXPECT_HAS(with(std::string(1000, 'x')), cat("`", std::string(200, 'x'), "...` (1000 bytes), is not JSON"));
  // Finite as a double, infinite as the fp32 the advantages are computed in.
  EXPECT_HAS(with("1e39"), "`1e39`, is beyond +-1e+30");
  EXPECT_HAS(with("{\"score\": -1.7e308}"), "is beyond +-1e+30");
}

// A line past 1 MiB without its end is quoted clipped like any other (outside sweep 37 F1: std::quoted,
// found by argument-dependent lookup, quoted it whole: a 1 MiB line on stderr per rank).
TEST_F(CommandRewardTest, AnOverLongAnswerLineIsQuotedClipped) {
  const std::string e = failure(*make_reward("command:read -r l; head -c 1100000 /dev/zero | tr '\\0' 1; exec sleep 30", 10), inputs(2));
  EXPECT_HAS(e, cat("is a line of over 1048576 bytes without its end: `", std::string(200, '1'), "...` ("));
  EXPECT_LT(e.size(), 2000u);
}

// A program's faults other than ending (a bad answer, a timeout) are not RewardProgramEnded, the one
// error the trainer may take for a whole-job stop's doing; an exit is.
TEST_F(CommandRewardTest, OnlyAnEndedProgramIsRewardProgramEnded) {
  const auto kind = [&](const std::string& spec) {
    try {
      make_reward(spec, 0.5)->score(inputs(3));
    } catch (const RewardProgramEnded&) {
      return std::string("ended");
    } catch (const Error&) {
      return std::string("fault");
    }
    return std::string("none");
  };
  EXPECT_EQ(kind("command:exit 0"), "ended");
  EXPECT_EQ(kind("command:kill -TERM $$"), "ended");
  EXPECT_EQ(kind("command:while read -r l; do echo x; done"), "fault");
  EXPECT_EQ(kind("command:exec sleep 30"), "fault");
}

TEST_F(CommandRewardTest, ASilentProgramTimesOutAndIsKilled) {
  auto reward = make_reward("command:echo $$ > " + pid_file() + "; exec sleep 30", 0.5);
  const std::string e = failure(*reward, inputs(3));
  EXPECT_HAS(e, "no progress for rl.reward_timeout_s=0.5 s: it had answered 0 of the 3 lines of this batch");
  EXPECT_HAS(e, "ztrain killed it");
  EXPECT_HAS(e, "flush=True");
  pid_t pid = -1;
  std::ifstream(pid_file()) >> pid;
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(reaped(pid));
}

TEST_F(CommandRewardTest, AProgramThatClosesItsInputAndHangsTimesOut) {
  const std::string e = failure(*make_reward("command:exec 0<&-; sleep 30", 0.5), inputs(5000, 2000));
  EXPECT_HAS(e, "no progress for rl.reward_timeout_s=0.5 s");
  EXPECT_HAS(e, "(the program closed its stdin)");
}

// What the program starts in the background (a helper server) is killed with it at the end: left
// running it would hold ztrain's stderr open, and mpirun (or a `| tee log`) would wait for it.
TEST_F(CommandRewardTest, TheEndKillsWhatTheProgramStarted) {
  const std::string helper = (dir_ / "helper").string();
  auto reward = make_reward("command:sleep 30 & echo $! > " + helper + "; while read -r l; do echo 1; done", 10);
  EXPECT_EQ(reward->score(inputs(2)), (std::vector<double>{1, 1}));
  pid_t pid = -1;
  std::ifstream(helper) >> pid;
  ASSERT_GT(pid, 0);
  reward.reset();  // its stdin closes, the loop ends, sh exits: the helper goes with it
  // Killed: gone, or a zombie left to whoever reaps orphans here (state Z in /proc/PID/stat)
  const auto dead = [&] {
    std::string stat;
    std::getline(std::ifstream("/proc/" + std::to_string(pid) + "/stat"), stat);
    const std::size_t paren = stat.rfind(')');
    return reaped(pid) || (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
  };
  for (int i = 0; i < 100 && !dead(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(dead()) << "the background helper " << pid << " outlived the run";
}

// A rank that dies without running a destructor (SIGKILL from mpirun's teardown; here a child process's
// _exit) still has the program's group killed, the helper it started included: the watcher in the group
// sees the life pipe's end.
TEST_F(CommandRewardTest, ARankThatDiesTakesTheProgramsGroupWithIt) {
  const std::string helper = (dir_ / "helper").string();
  const pid_t rank = ::fork();
  ASSERT_GE(rank, 0);
  if (rank == 0) {  // the "rank": starts the program, scores once, dies at once
    auto reward = make_reward("command:sleep 30 & echo $! > " + helper + "; while read -r l; do echo 1; done", 10);
    const bool scored = reward->score(inputs(1)) == std::vector<double>{1};
    ::_exit(scored ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(rank, &status, 0), rank);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the rank's scoring failed";
  pid_t pid = -1;
  std::ifstream(helper) >> pid;
  ASSERT_GT(pid, 0);
  const auto dead = [&] {
    std::string stat;
    std::getline(std::ifstream("/proc/" + std::to_string(pid) + "/stat"), stat);
    const std::size_t paren = stat.rfind(')');
    return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
  };
  for (int i = 0; i < 300 && !dead(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool gone = dead();
  if (!gone) ::kill(pid, SIGKILL);
  EXPECT_TRUE(gone) << "the background helper " << pid << " outlived its rank";
}

// Its environment is ztrain's less what the MPI launcher set for ztrain's rank: an MPI program it starts
// is a job of its own. The user's MCA settings stay.
TEST_F(CommandRewardTest, TheProgramDoesNotInheritTheRanksMpiVariables) {
  ::setenv("OMPI_COMM_WORLD_RANK", "3", 1), ::setenv("PMIX_RANK", "3", 1), ::setenv("OMPI_MCA_ess", "singleton", 1);
  ::setenv("OMPI_MCA_btl", "self,tcp", 1);
  // 100 for the user's setting, plus anything of the rank's
  auto reward = make_reward("command:b=0; [ \"$OMPI_MCA_btl\" = self,tcp ] && b=100; while read -r l; do "
                            "echo $((${OMPI_COMM_WORLD_RANK:-0} + ${PMIX_RANK:-0} + ${#OMPI_MCA_ess} + b)); done", 10);
  EXPECT_EQ(reward->score(inputs(1)), (std::vector<double>{100}));
  ::unsetenv("OMPI_COMM_WORLD_RANK"), ::unsetenv("PMIX_RANK"), ::unsetenv("OMPI_MCA_ess"), ::unsetenv("OMPI_MCA_btl");
}

TEST_F(CommandRewardTest, TheEndKillsAProgramThatIgnoresItsEndOfInput) {
  auto reward = make_reward("command:exec sleep 30", 10);
  const pid_t pid = pid_of(*reward);
  reward.reset();  // waits 2 s, then SIGKILL
  EXPECT_TRUE(reaped(pid));
}

}  // namespace
}  // namespace zt::rl
