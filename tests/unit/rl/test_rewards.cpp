// RL's built-in rewards (rl.reward=answer|answer:RULE|exact|regex:PATTERN) score verl's way, and a bad
// rl.reward or rl.reward_timeout_s is a ConfigError (exit 2) naming the key and the valid forms.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "rl/rewards.hpp"

namespace zt::rl {
namespace {

std::vector<double> scores(const std::string& spec, const std::vector<std::pair<std::string, std::string>>& cases) {
  std::vector<RewardInput> batch;
  for (const auto& [response, reference] : cases) batch.push_back({"a prompt", response, reference, 7});
  return make_reward(spec, 60)->score(batch);
}

std::string refusal(const std::string& spec, double timeout_s = 60) {
  try {
    make_reward(spec, timeout_s);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    return e.what();
  }
  return "";
}

TEST(Rewards, AnswerIsGsm8ksStrictRuleByDefault) {
  EXPECT_EQ(scores("answer", {{"6 * 3 = 18\n#### 18", "18"},
                              {"#### 17", "18"},
                              {"the answer is 18", "18"},  // no "#### N": no answer (the format is the task's)
                              {"#### 1,800", "1800"},
                              {"#### 18.0", "18"}}),
            (std::vector<double>{1, 0, 0, 1, 1}));
  EXPECT_EQ(make_reward("answer", 60)->describe(),
            "rl.reward=answer: 1 when the answer by rule gsm8k equals the reference, else 0");
}

// GSM8K's "answer" field as it ships (the worked solution ending "#### N") scores as the bare N does.
TEST(Rewards, AReferenceHoldingAnAnswerIsReducedToItByTheRule) {
  const std::string solution = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n48+24 = <<48+24=72>>72\n#### 72";
  EXPECT_EQ(scores("answer", {{"so #### 72", solution}, {"#### 24", solution}, {"#### 72", "72"}}),
            (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(scores("answer:boxed", {{"\\boxed{7}", "so \\boxed{7}"}}), (std::vector<double>{1}));
}

TEST(Rewards, AnswerTakesAnyAnswerRule) {
  EXPECT_EQ(scores("answer:gsm8k-flexible", {{"so it is 18.", "18"}, {"18 or 19", "18"}}), (std::vector<double>{1, 0}));
  EXPECT_EQ(scores("answer:boxed", {{"so \\boxed{x^{2}} it is", "x^{2}"}, {"x^{2}", "x^{2}"}}), (std::vector<double>{1, 0}));
  EXPECT_EQ(scores("answer:exact", {{" 42 ", "42"}}), (std::vector<double>{1}));
}

TEST(Rewards, ExactComparesTheTrimmedResponse) {
  EXPECT_EQ(scores("exact", {{"  yes\n", "yes"}, {"yes!", "yes"}, {"", "yes"}}), (std::vector<double>{1, 0, 0}));
}

TEST(Rewards, RegexTakesTheLastMatchItsFirstGroup) {
  EXPECT_EQ(scores("regex:answer=(-?[0-9]+)", {{"answer=4, no: answer=5", "5"}, {"answer=4, no: answer=5", "4"},
                                               {"no answer", "5"}}),
            (std::vector<double>{1, 0, 0}));
  EXPECT_NE(make_reward("regex:x", 60)->describe().find("rl.reward=regex:x"), std::string::npos);
}

TEST(Rewards, AnEmptyBatchScoresNothing) { EXPECT_TRUE(make_reward("answer", 60)->score({}).empty()); }

TEST(Rewards, BadSpecsNameTheKeyAndTheValidForms) {
  for (const std::string spec : {"", "answers", "Answer", "gsm8k", "command", "answer:nope"}) {
    const std::string e = refusal(spec);
    EXPECT_NE(e.find("rl.reward=" + spec), std::string::npos) << e;
    EXPECT_NE(e.find("answer:RULE (RULE: gsm8k, gsm8k-flexible, boxed, exact or regex:PATTERN), exact, regex:PATTERN "
                     "or command:PROGRAM"), std::string::npos) << e;
  }
  EXPECT_NE(refusal("gsm8k").find("(the answer rule is answer:gsm8k)"), std::string::npos);
  EXPECT_NE(refusal("regex:").find("rl.reward=regex: has no pattern"), std::string::npos);
  EXPECT_NE(refusal("regex:(").find("rl.reward=regex:(: the pattern is not an ECMAScript regular expression"),
            std::string::npos);
  EXPECT_NE(refusal("answer:regex:(").find("rl.reward=answer:regex:(: the rule after answer: is not valid"),
            std::string::npos);
  EXPECT_NE(refusal("command:").find("rl.reward=command: has no program"), std::string::npos);
  EXPECT_NE(refusal("command: \t").find("has no program: write command:PROGRAM"), std::string::npos);
  for (const double t : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
    EXPECT_NE(refusal("command:cat", t).find("rl.reward_timeout_s="), std::string::npos) << t;
}

}  // namespace
}  // namespace zt::rl
