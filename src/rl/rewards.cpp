// RL's rewards (rewards.hpp): the built-in answer rules and the factory that reads rl.reward.
#include "rl/rewards.hpp"

#include <cmath>

#include "core/error.hpp"
#include "gen/answers.hpp"
#include "rl/rewards_command.hpp"

namespace zt::rl {
namespace {

constexpr const char* kForms =
    "use answer (GSM8K's \"#### N\"), answer:RULE (RULE: gsm8k, gsm8k-flexible, boxed, exact or regex:PATTERN), "
    "exact, regex:PATTERN or command:PROGRAM";

// 1 for a response whose answer by the rule equals the reference, else 0. A reference holding an answer
// by the rule (GSM8K's "answer" field: the solution ending "#### 72") is reduced to it first, as zgen's
// and training's evaluations do, so the dataset's lines serve as they are.
class AnswerReward : public Reward {
 public:
  AnswerReward(std::string spec, gen::AnswerRule rule) : spec_(std::move(spec)), rule_(std::move(rule)) {}

  std::vector<double> score(const std::vector<RewardInput>& batch) override {
    std::vector<double> scores;
    scores.reserve(batch.size());
    for (const RewardInput& in : batch) scores.push_back(rule_.score(in.response, rule_.reduce_reference(in.reference)));
    return scores;
  }

  std::string describe() const override {
    return cat("rl.reward=", spec_, ": 1 when the answer by rule ", rule_.name(),
               " equals the reference, else 0");
  }

 private:
  std::string spec_;
  gen::AnswerRule rule_;
};

// The answer rule named `rule` for rl.reward=`spec`; a bad rule names the whole value and the forms.
std::unique_ptr<Reward> answer_reward(const std::string& spec, const std::string& rule) {
  try {
    return std::make_unique<AnswerReward>(spec, gen::AnswerRule::parse(rule, "rl.reward"));
  } catch (const ConfigError& e) {
    if (spec == rule) throw ConfigError(cat(e.what(), "; rl.reward: ", kForms));
    throw ConfigError(cat("rl.reward=", spec, ": the rule after answer: is not valid (", e.what(), "); ", kForms));
  }
}

}  // namespace

std::unique_ptr<Reward> make_reward(const std::string& spec, double timeout_s) {
  if (spec == "answer") return answer_reward(spec, "gsm8k");
  if (spec.starts_with("answer:")) return answer_reward(spec, spec.substr(7));
  if (spec == "exact") return answer_reward(spec, "exact");
  if (spec.starts_with("regex:")) {
    if (spec.size() == 6)
      throw ConfigError("rl.reward=regex: has no pattern: write regex:PATTERN, e.g. regex:answer: (-?[0-9]+)");
    return answer_reward(spec, spec);
  }
  if (spec.starts_with("command:")) {
    const std::string program = spec.substr(8);
    if (program.find_first_not_of(" \t") == std::string::npos)
      throw ConfigError(cat("rl.reward=", spec, " has no program: write command:PROGRAM, e.g. command:python3 reward.py"));
    if (!(timeout_s > 0) || !std::isfinite(timeout_s))
      throw ConfigError(cat("rl.reward_timeout_s=", timeout_s, " is not a time: use a number of seconds > 0, e.g. 60"));
    return std::make_unique<CommandReward>(program, timeout_s);
  }
  const bool rule = spec == "gsm8k" || spec == "gsm8k-flexible" || spec == "boxed";
  throw ConfigError(cat("rl.reward=", spec, " is not a reward", rule ? cat(" (the answer rule is answer:", spec, ")") : "",
                        ": ", kForms));
}

}  // namespace zt::rl
