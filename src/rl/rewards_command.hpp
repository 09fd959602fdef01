// The command reward (rl.reward=command:PROGRAM): a user's program scoring responses over JSON Lines on
// its stdin and stdout. rewards.hpp states the protocol; make_reward builds this from the spec.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "rl/rewards.hpp"

namespace zt::rl {

class CommandReward : public Reward {
 public:
  // Starts `/bin/sh -c program` in a process group of its own; throws zt::Error when it cannot.
  CommandReward(std::string program, double timeout_s);
  // Closes the program's stdin, waits up to 2 s for it to exit, then kills its group (what it started
  // too: a helper left running would hold the job's output open); reaps it. A non-zero exit, or a
  // program that had to be killed, is warned about.
  ~CommandReward() override;
  CommandReward(const CommandReward&) = delete;
  CommandReward& operator=(const CommandReward&) = delete;

  std::vector<double> score(const std::vector<RewardInput>& batch) override;
  std::string describe() const override;

 private:
  std::vector<double> exchange(const std::vector<RewardInput>& batch);
  bool write_some(const std::string& out, std::size_t& written);
  // ended: the program is known to have ended (an end of file is then no news).
  void read_some(std::vector<double>& scores, std::size_t n, bool ended = false);
  double parse_answer(std::string_view line, std::size_t index, std::size_t n) const;
  void check_idle();
  RewardProgramEnded stopped(std::size_t answered, std::size_t n);
  Error timed_out(std::size_t answered, std::size_t n, std::size_t written, std::size_t total, bool input_closed);
  std::string prefix() const;
  std::string ending();
  bool exited();
  bool wait_exit(int timeout_ms);
  void kill_group();

  std::string program_;
  double timeout_s_;
  pid_t pid_ = -1;
  int to_ = -1;    // the program's stdin (our end, non-blocking)
  int from_ = -1;  // the program's stdout (our end, non-blocking)
  int life_ = -1;  // held open while ztrain lives: its end (a rank killed) has the program's group killed
  std::string pending_;  // bytes read after the last complete answer line
  bool reaped_ = false;
  int status_ = -1;  // waitpid's status once reaped; -1 unknown (reaped elsewhere)
  bool failed_ = false;
};

}  // namespace zt::rl
