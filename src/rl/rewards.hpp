// RL's rewards on verifiable answers (issue 33): the score of each response against its prompt's
// reference, chosen by `rl.reward`:
//   answer          the final answer by gen::AnswerRule "gsm8k" (verl's strict "#### N" rule)
//   answer:RULE     the final answer by any answer rule: gsm8k, gsm8k-flexible, boxed, exact, regex:PATTERN
//   exact           the whole response, trimmed, equal to the reference (rule "exact")
//   regex:PATTERN   the last match of PATTERN (its first group when it has one) equal to the reference
//   command:PROGRAM a program the user writes (below)
// The built-in rewards score 1 for an answer equal to the reference, else 0 (verl's compute_score with
// its defaults; gen/answers.hpp has the rules).
//
// The program's protocol (command:PROGRAM), JSON Lines over its stdin and stdout:
// - ztrain starts `/bin/sh -c PROGRAM` once, in ztrain's working directory and environment, in a process
//   group of its own, and keeps it running for the whole run. Its stderr is ztrain's (not captured):
//   what it prints there, a Python traceback say, appears in ztrain's output before ztrain's error.
// - For each response ztrain writes one line, an object (UTF-8; invalid bytes in a response replaced
//   by U+FFFD): {"prompt": "...", "response": "...", "reference": "...", "id": <the prompt line's id>}
//   and the program writes one line back, in the same order: a JSON number (`1`, `0.5`) or an object
//   with a numeric "score" (`{"score": 1.0}`; other fields are ignored). A batch's lines are all
//   written before its answers are all read (pipelined), so the program may read ahead, and must not
//   wait for the end of its input before answering: it ends only with the run.
// - The program must flush its output after each answer (Python: print(x, flush=True); stdout to a
//   pipe is block-buffered) or ztrain waits for answers still in its buffer until the timeout.
// - Timeout: rl.reward_timeout_s is the longest the program may go without progress, i.e. without
//   reading a byte of its input or writing a byte of its answers (not a limit on a whole batch). Then
//   ztrain kills its process group (SIGKILL) and fails.
// - At the end ztrain closes the program's stdin and waits up to 2 s for it to exit (reading and
//   dropping what it still writes), then kills its process group. No zombie is left.
// Misbehaviour is an error (zt::Error, exit 1) naming the program, what happened and the offending line
// (the first 200 characters): an exit or closed stdout before the batch is answered (its exit status or
// signal; 127 is "not found"), a line that is not JSON (NaN and Infinity, which Python's json.dumps
// writes, are not), a value that is not a number nor has a numeric "score", a score that is not finite,
// and more answers than lines. After an error the reward is spent: each later call throws.
// A bad spec is a ConfigError (exit 2) naming rl.reward and the valid forms.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace zt::rl {

// One response to score. id is the prompt line's "id", any JSON, passed to a command reward as is.
struct RewardInput {
  std::string prompt;
  std::string response;
  std::string reference;
  nlohmann::json id;
};

// A command reward's program ended (closed its output, exited) before it answered every line: what a
// whole-job stop signal also causes, so the trainer may treat it as the stop. Its other faults (an answer
// that is no score, silence past rl.reward_timeout_s) are plain zt::Errors: the program's own.
class RewardProgramEnded : public Error {
 public:
  using Error::Error;
};

// A reward of responses. Per process and not thread-safe: one caller at a time.
class Reward {
 public:
  virtual ~Reward() = default;
  // One score per input, in order. Throws zt::Error when the reward fails (command: the program).
  virtual std::vector<double> score(const std::vector<RewardInput>& batch) = 0;
  // One start-up line: `rl.reward=SPEC: what it scores`.
  virtual std::string describe() const = 0;
};

// The reward `spec` names (the forms above). timeout_s is rl.reward_timeout_s (command: only; > 0).
// A bad spec or timeout is a ConfigError naming the key, the value and the valid forms. A command
// reward starts its program here (a failure to start it is a zt::Error).
std::unique_ptr<Reward> make_reward(const std::string& spec, double timeout_s);

}  // namespace zt::rl
