// Verifiable answers (gen/answers.hpp): verl's GSM8K rules, \boxed{}, exact and regex rules, scores,
// and the unbiased pass@k.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "gen/answers.hpp"

namespace zt::gen {
namespace {

AnswerRule rule(const std::string& spec) { return AnswerRule::parse(spec, "rl.reward"); }

TEST(Answers, Gsm8kStrictTakesTheFirstMarkedNumberWithoutCommasOrDollars) {
  const AnswerRule r = rule("gsm8k");
  EXPECT_EQ(r.extract("She pays 3 * 4 = 12.\n#### 1,234").value(), "1234");
  EXPECT_EQ(r.extract("#### -7.5 and later #### 9").value(), "-7.5");  // verl's re.search: the first
  EXPECT_EQ(r.extract("#### $5 then #### 6").value(), "6");              // "$5" is not in the format
  EXPECT_FALSE(r.extract("The answer is 12.").has_value());                // no "#### ": no answer
  EXPECT_FALSE(r.extract("####12").has_value());                          // the space is part of the format
  EXPECT_EQ(r.score("so #### 72", "72"), 1.0);
  EXPECT_EQ(r.score("so #### 72.0", "72"), 1.0);  // equal as numbers
  EXPECT_EQ(r.score("so #### 71", "72"), 0.0);
  EXPECT_EQ(r.score("so #### 71", "72", 0.1), 0.1);  // verl's format_score: an answer in the format
  EXPECT_EQ(r.score("72", "72", 0.1), 0.0);          // no answer at all
}

TEST(Answers, Gsm8kFlexibleTakesTheLastNumber) {
  const AnswerRule r = rule("gsm8k-flexible");
  EXPECT_EQ(r.extract("3 apples and 4 pears make 7.").value(), "7.");
  EXPECT_EQ(r.score("3 apples and 4 pears make 7.", "7"), 1.0);  // "7." is 7 as a number
  EXPECT_EQ(r.extract("costs 1,000 dollars . ").value(), "1,000");
  EXPECT_EQ(r.score("costs 1,000 dollars", "1000"), 1.0);
  EXPECT_FALSE(r.extract("no digits here.").has_value());
}

TEST(Answers, BoxedExactAndRegex) {
  const AnswerRule boxed = rule("boxed");
  EXPECT_EQ(boxed.extract("so \\boxed{1} then \\boxed{\\frac{1}{2}} done").value(), "\\frac{1}{2}");
  EXPECT_FALSE(boxed.extract("\\boxed{unclosed").has_value());
  EXPECT_EQ(boxed.score("\\boxed{ 42 }", "42"), 1.0);
  const AnswerRule exact = rule("exact");
  EXPECT_EQ(exact.score("  Paris\n", "Paris"), 1.0);
  EXPECT_EQ(exact.score("Paris, France", "Paris"), 0.0);
  const AnswerRule re = rule("regex:Answer: ([A-D])");
  EXPECT_EQ(re.extract("Answer: B ... Answer: C").value(), "C");  // the last match, its group
  EXPECT_EQ(re.score("Answer: C", "C"), 1.0);
  EXPECT_EQ(rule("regex:[0-9]+").extract("a 1 b 22").value(), "22");  // no group: the match
}

TEST(Answers, UnknownRulesAndBadPatternsNameTheKey) {
  for (const char* bad : {"gsm9k", "regex:", "regex:([0-9]", ""}) {
    try {
      rule(bad);
      ADD_FAILURE() << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("rl.reward="), std::string::npos) << e.what();
    }
  }
}

// pass@k = 1 - C(n-c, k) / C(n, k): n = 10 samples, c = 3 correct.
TEST(Answers, PassAtKIsTheUnbiasedEstimator) {
  EXPECT_NEAR(pass_at_k(10, 3, 1), 0.3, 1e-12);
  EXPECT_NEAR(pass_at_k(10, 3, 2), 1.0 - 21.0 / 45.0, 1e-12);  // C(7,2)/C(10,2)
  EXPECT_NEAR(pass_at_k(10, 3, 5), 1.0 - 21.0 / 252.0, 1e-12);  // C(7,5)/C(10,5)
  EXPECT_EQ(pass_at_k(10, 3, 8), 1.0);                          // 8 > 7 wrong: a correct one is always drawn
  EXPECT_EQ(pass_at_k(5, 0, 3), 0.0);
  EXPECT_EQ(pass_at_k(1, 1, 1), 1.0);
  EXPECT_THROW(pass_at_k(3, 4, 1), Error);
}

}  // namespace
}  // namespace zt::gen

namespace zt::gen {
namespace {

// Two prompts of 3 samples: scores (1, 0, 1) and (0, 0, 0.5): accuracy 2.5/6; pass@1 = mean of 2/3 and 0;
// pass@3 = mean of 1 and 0 (a format score of 0.5 is not correct).
TEST(Summary, AccuracyAndPassAtKOverPrompts) {
  const std::vector<ScoredSample> s = {{0, 1}, {0, 0}, {0, 1}, {1, 0}, {1, 0}, {1, 0.5}};
  const EvalSummary e = summarize(s, 3);
  EXPECT_EQ(e.prompts, 2u);
  EXPECT_NEAR(e.accuracy, 2.5 / 6, 1e-12);
  EXPECT_NEAR(e.pass_at_1, (2.0 / 3) / 2, 1e-12);
  EXPECT_NEAR(e.pass_at_samples, 0.5, 1e-12);
  EXPECT_EQ(summarize({}, 1).prompts, 0u);
}

}  // namespace
}  // namespace zt::gen
