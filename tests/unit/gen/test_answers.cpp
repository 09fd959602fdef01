// Verifiable answers (gen/answers.hpp): verl's GSM8K rules, \boxed{}, exact and regex rules, scores,
// and the unbiased pass@k.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "gen/answers.hpp"

namespace zt::gen {
namespace {

AnswerRule rule(const std::string& spec) { return AnswerRule::parse(spec, "rl.reward"); }

// verl's current gsm8k.py: the response clipped to its last 300 characters, then the last match.
TEST(Answers, Gsm8kStrictTakesTheLastMarkedNumberWithoutCommasOrDollars) {
  const AnswerRule r = rule("gsm8k");
  EXPECT_EQ(r.extract("She pays 3 * 4 = 12.\n#### 1,234").value(), "1234");
  EXPECT_EQ(r.extract("#### -7.5 and later #### 9").value(), "9");  // verl's findall: the last
  EXPECT_EQ(r.extract("#### 6 then #### $5").value(), "6");         // "$5" is not in the format
  EXPECT_EQ(r.extract("##### 8").value(), "8");
  EXPECT_FALSE(r.extract("The answer is 12.").has_value());           // no "#### ": no answer
  EXPECT_FALSE(r.extract("####12").has_value());                     // the space is part of the format
  EXPECT_FALSE(r.extract("#### 5" + std::string(300, 'x')).has_value());  // past the last 300 characters
  EXPECT_EQ(r.extract("#### 5" + std::string(294, 'x')).value(), "5");   // "#### 5" + 294: exactly 300
  // 300 characters, not bytes: 294 two-byte characters after "#### 5" leave it in.
  std::string wide;
  for (int i = 0; i < 294; ++i) wide += "\xc3\xa9";
  EXPECT_EQ(r.extract("#### 5" + wide).value(), "5");
  EXPECT_FALSE(r.extract("#### 5" + wide + "\xc3\xa9").has_value());
  EXPECT_EQ(r.score("so #### 72", "72"), 1.0);
  EXPECT_EQ(r.score("so #### 72.0", "72"), 1.0);  // equal as numbers
  EXPECT_EQ(r.score("so #### 71", "72"), 0.0);
  EXPECT_EQ(r.score("so #### 71", "72", 0.1), 0.1);  // verl's format_score: an answer in the format
  EXPECT_EQ(r.score("72", "72", 0.1), 0.0);          // no answer at all
}

TEST(Answers, Gsm8kFlexibleTakesTheLastNumber) {
  const AnswerRule r = rule("gsm8k-flexible");
  EXPECT_EQ(r.extract("3 apples and 4 pears make 7.").value(), "7");  // less the sentence's full stop
  EXPECT_EQ(r.score("3 apples and 4 pears make 7.", "7"), 1.0);
  EXPECT_EQ(r.score("The answer is 2.5.", "2.5"), 1.0);  // a decimal too (outside sweep 36 F2)
  EXPECT_EQ(r.score("The total is $1,000.", "1000"), 1.0);
  EXPECT_EQ(r.extract("costs 1,000 dollars . ").value(), "1,000");
  EXPECT_EQ(r.extract("5-3").value(), "-3");
  EXPECT_EQ(r.extract("a . b . c").value(), ".");  // every match ".": verl's loop leaves the first
  EXPECT_EQ(r.score("costs 1,000 dollars", "1000"), 1.0);
  EXPECT_EQ(r.extract("no digits here.").value(), ".");  // an answer, which equals no number
  EXPECT_EQ(r.score("no digits here.", "7", 0.1), 0.1);
  EXPECT_FALSE(r.extract("no digits here").has_value());
}

// Numbers compare as plain decimals (outside sweep 36 F1): commas only where they group thousands (a list
// "1,2" is not twelve), no hex, inf or nan (strtod's syntax), integers past 2^53 exactly.
TEST(Answers, NumbersCompareAsPlainDecimalsExactly) {
  const AnswerRule boxed = rule("boxed");
  EXPECT_EQ(boxed.score("\\boxed{1,2}", "12"), 0.0);
  EXPECT_EQ(boxed.score("\\boxed{1,0,0}", "100"), 0.0);
  EXPECT_EQ(boxed.score("\\boxed{1,2}", "1,2"), 1.0);  // the same text
  EXPECT_EQ(boxed.score("\\boxed{1,2345}", "12345"), 0.0);
  EXPECT_EQ(boxed.score("\\boxed{12,345}", "12345"), 1.0);
  EXPECT_EQ(boxed.score("\\boxed{1,234,567.50}", "1234567.5"), 1.0);
  EXPECT_EQ(boxed.score("\\boxed{0x1F}", "31"), 0.0);
  EXPECT_EQ(boxed.score("\\boxed{0x10}", "16"), 0.0);
  EXPECT_EQ(boxed.score("\\boxed{inf}", "infinity"), 0.0);
  EXPECT_EQ(boxed.score("\\boxed{nan}", "nan"), 1.0);  // the same text
  EXPECT_EQ(boxed.score("\\boxed{1e3}", "1000"), 1.0);  // an exponent is decimal notation
  EXPECT_EQ(boxed.score("\\boxed{1.5e-3}", "0.0015"), 1.0);
  EXPECT_EQ(boxed.score("\\boxed{2.5E+2}", "250.0"), 1.0);
  EXPECT_EQ(boxed.score("\\boxed{1e}", "1"), 0.0);
  EXPECT_EQ(boxed.score("\\boxed{1e1234567890}", "1"), 0.0);  // past 9 exponent digits: text
  EXPECT_EQ(boxed.score("\\boxed{-0.0}", "0"), 1.0);
  EXPECT_EQ(boxed.score("\\boxed{+5}", "5.00"), 1.0);
  EXPECT_EQ(boxed.score("\\boxed{.5}", "0.5"), 1.0);
  EXPECT_EQ(boxed.score("\\boxed{007}", "7"), 1.0);
  EXPECT_EQ(boxed.score("\\boxed{-7}", "7"), 0.0);
  EXPECT_EQ(boxed.score("\\boxed{0.1}", "0.10000000000000001"), 0.0);  // equal as doubles, not as numbers
  const AnswerRule gsm8k = rule("gsm8k");
  EXPECT_EQ(gsm8k.score("#### 12345678901234567", "12345678901234568"), 0.0);
  EXPECT_EQ(gsm8k.score("#### 12345678901234567", "12,345,678,901,234,567"), 1.0);
  EXPECT_EQ(gsm8k.extract("#### 1,2").value(), "1,2");  // not a grouped number: kept as written
  EXPECT_EQ(gsm8k.score("#### 1,2", "12"), 0.0);
  EXPECT_EQ(gsm8k.extract("#### 2.5.").value(), "2.5");
}

// A reference that is a plain number or a fraction is its own answer (outside sweep 36 F3): the flexible
// and regex rules reduced "3/4" to 4 and "1,234" to 234. Other references are reduced as before.
TEST(Answers, APlainNumberReferenceIsNotReduced) {
  const AnswerRule flexible = rule("gsm8k-flexible");
  EXPECT_EQ(flexible.reduce_reference("3/4"), "3/4");
  EXPECT_EQ(flexible.score("It is 4", flexible.reduce_reference("3/4")), 0.0);
  EXPECT_EQ(flexible.reduce_reference("1,234"), "1,234");
  EXPECT_EQ(flexible.reduce_reference("So the answer is 72"), "72");
  EXPECT_EQ(flexible.reduce_reference("$18"), "18");
  const AnswerRule re = rule("regex:([0-9]+)");
  EXPECT_EQ(re.reduce_reference("1,234"), "1,234");
  EXPECT_EQ(re.score("It is 234", re.reduce_reference("1,234")), 0.0);
  EXPECT_EQ(re.score("It is 1234", re.reduce_reference("1,234")), 1.0);
  EXPECT_EQ(rule("regex:<a>(.*)</a>").reduce_reference("<a>5</a>"), "5");
  const AnswerRule gsm8k = rule("gsm8k");
  EXPECT_EQ(gsm8k.reduce_reference("3 + 4 = 7\n#### 7"), "7");
  EXPECT_EQ(gsm8k.reduce_reference(" 72 "), " 72 ");
  EXPECT_EQ(rule("boxed").reduce_reference("\\boxed{3/4}"), "3/4");
}

TEST(Answers, BoxedExactAndRegex) {
  const AnswerRule boxed = rule("boxed");
  EXPECT_EQ(boxed.extract("so \\boxed{1} then \\boxed{\\frac{1}{2}} done").value(), "\\frac{1}{2}");
  EXPECT_FALSE(boxed.extract("\\boxed{unclosed").has_value());
  EXPECT_EQ(boxed.score("\\boxed{ 42 }", "42"), 1.0);
  EXPECT_EQ(boxed.score("\\boxed{18.0}", "18"), 1.0);    // numbers as numbers in every rule but exact
  EXPECT_EQ(boxed.score("\\boxed{1,234}", "1234"), 1.0);
  const AnswerRule exact = rule("exact");
  EXPECT_EQ(exact.score("  Paris\n", "Paris"), 1.0);
  EXPECT_EQ(exact.score("Paris, France", "Paris"), 0.0);
  EXPECT_EQ(exact.score("18.0", "18"), 0.0);
  const AnswerRule re = rule("regex:Answer: ([A-D])");
  EXPECT_EQ(re.extract("Answer: B ... Answer: C").value(), "C");  // the last match, its group
  EXPECT_EQ(re.score("Answer: C", "C"), 1.0);
  EXPECT_EQ(rule("regex:[0-9]+").extract("a 1 b 22").value(), "22");  // no group: the match
  EXPECT_EQ(rule("regex:answer: (.*)").score("answer: 18.0", "18"), 1.0);
}

// A degenerate response (an RL policy repeating digits, a long-context answer) gives an answer or none:
// std::regex recurses once per character, which overflowed the stack at a few tens of thousands.
TEST(Answers, LongResponsesNeverCrashARule) {
  const std::string digits(200000, '7');
  EXPECT_FALSE(rule("gsm8k").extract("#### " + digits).has_value());  // its last 300 characters hold no "#### "
  EXPECT_EQ(rule("gsm8k").extract(digits + " #### 42").value(), "42");
  EXPECT_EQ(rule("gsm8k-flexible").extract(digits).value(), std::string(300, '7'));
  EXPECT_EQ(rule("regex:answer: (.*)").extract("answer: " + std::string(200000, 'x')).value(), std::string(200000, 'x'));
  EXPECT_EQ(rule("regex:answer: (.*)").extract(std::string(1 << 20, 'x') + "answer: 5").value(), "5");  // its last 256 KiB
  EXPECT_FALSE(rule("regex:answer: (.*)").extract("answer: " + std::string(1 << 20, 'x')).has_value());
  EXPECT_EQ(rule("regex:((?:.|\\n)*)z").extract(std::string(100000, 'y') + "z").value(), std::string(100000, 'y'));
  EXPECT_EQ(rule("boxed").extract("\\boxed{" + digits + "}").value(), digits);
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
