// Verifiable answers: the final answer a rule takes from a response, its score against the reference,
// and pass@k. The evaluation of a fine-tune (zgen's, and at train.eval_every) and RL's rewards
// (rl.reward=answer|exact|regex:...) read the same rules. Rules, by their names in configurations:
//   gsm8k           verl's gsm8k strict rule: in the last 300 characters, the last "#### N" (N: -?[0-9.,]+),
//                   thousands' commas removed; no such line is no answer (the format is part of the task).
//   gsm8k-flexible  verl's flexible rule: in the last 300 characters, the last number-like run
//                   (-?[0-9.,]+) that is not "." (the first when all are).
//                   Both take one '.' ending the run as the sentence's full stop, not the number's.
//   boxed           the content of the last \boxed{...} (braces balanced), as MATH answers are written.
//   exact           the whole response, surrounding white space trimmed.
//   regex:PATTERN   the last match of PATTERN (ECMAScript) in the response's last 256 KiB, its first group
//                   when it has one.
// A score is `score` for an answer equal to the reference (both trimmed; in every rule other than exact
// also equal as plain decimal numbers, exactly: "18.0" is "18", "1,234" is "1234" and "1e3" is "1000", but
// the list "1,2" is not 12, and "0x1F", "inf" or "nan" are no numbers), `format_score` for another
// answer, 0 for none: verl's compute_score with its defaults 1 and 0. No rule recurses per character of
// the response: any text gives an answer or none.
#pragma once

#include <optional>
#include <span>
#include <regex>
#include <string>
#include <string_view>

namespace zt::gen {

class AnswerRule {
 public:
  // Throws ConfigError naming `key` and the rules for an unknown name or a bad pattern.
  static AnswerRule parse(const std::string& spec, const std::string& key);
  std::optional<std::string> extract(std::string_view response) const;
  // A reference field reduced to its answer when it holds one by this rule (GSM8K's solutions end in
  // "#### 72"), else as given: what zgen's and training's evaluations score against. A plain number or
  // fraction ("1,234", "3/4") is its own answer, never reduced to a piece of it.
  std::string reduce_reference(std::string_view reference) const;
  double score(std::string_view response, std::string_view reference, double format_score = 0,
               double score = 1) const;
  const std::string& name() const { return spec_; }

 private:
  enum class Kind { kGsm8k, kGsm8kFlexible, kBoxed, kExact, kRegex };
  Kind kind_ = Kind::kGsm8k;
  std::string spec_;
  std::regex pattern_;
};

// The unbiased pass@k of n samples with c correct (Chen et al. 2021, "Evaluating Large Language Models
// Trained on Code"): 1 - C(n-c, k) / C(n, k), computed as a product (no overflow). Needs 0 <= c <= n, 1 <= k <= n.
double pass_at_k(int n, int c, int k);

// An evaluation's figures over prompts of `samples` scored samples each (zgen's summary; RL's accuracy):
// accuracy, the mean score; pass@1 and pass@samples, each prompt's pass_at_k averaged over prompts, a
// sample counting as correct at score >= 1.
struct ScoredSample {
  std::size_t prompt = 0;
  double score = 0;
};
struct EvalSummary {
  double accuracy = 0, pass_at_1 = 0, pass_at_samples = 0;
  std::size_t prompts = 0;
};
EvalSummary summarize(std::span<const ScoredSample> scored, int samples);

}  // namespace zt::gen
