// Verifiable answers (answers.hpp).
#include "gen/answers.hpp"

#include <map>

#include <cstdlib>

#include "core/error.hpp"

namespace zt::gen {
namespace {

std::string trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1));
}

// GSM8K's number pattern: an optional minus, then digits, dots and commas.
const std::regex& number_run() {
  static const std::regex kRun(R"(-?[0-9.,]+)");
  return kRun;
}

std::string without(std::string s, const std::string& chars) {
  std::string out;
  for (char c : s)
    if (chars.find(c) == std::string::npos) out += c;
  return out;
}

// The content of the last \boxed{...}, its braces balanced.
std::optional<std::string> last_boxed(std::string_view text) {
  const std::size_t at = text.rfind("\\boxed{");
  if (at == std::string_view::npos) return std::nullopt;
  int depth = 0;
  for (std::size_t i = at + 6; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return std::string(text.substr(at + 7, i - at - 7));
  }
  return std::nullopt;  // unclosed: no answer
}

// Both parse whole as numbers and are equal: "18" and "18.0", "-3" and "-3.00".
bool same_number(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  char* ea = nullptr;
  char* eb = nullptr;
  const double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
  return *ea == '\0' && *eb == '\0' && x == y;
}

}  // namespace

AnswerRule AnswerRule::parse(const std::string& spec, const std::string& key) {
  AnswerRule r;
  r.spec_ = spec;
  if (spec == "gsm8k") r.kind_ = Kind::kGsm8k;
  else if (spec == "gsm8k-flexible") r.kind_ = Kind::kGsm8kFlexible;
  else if (spec == "boxed") r.kind_ = Kind::kBoxed;
  else if (spec == "exact") r.kind_ = Kind::kExact;
  else if (spec.starts_with("regex:") && spec.size() > 6) {
    r.kind_ = Kind::kRegex;
    try {
      r.pattern_ = std::regex(spec.substr(6), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw ConfigError(cat(key, "=", spec, ": the pattern is not an ECMAScript regular expression (", e.what(), ")"));
    }
  } else {
    throw ConfigError(cat(key, "=", spec, " is not an answer rule: use gsm8k, gsm8k-flexible, boxed, exact or regex:PATTERN"));
  }
  return r;
}

std::optional<std::string> AnswerRule::extract(std::string_view response) const {
  const std::string text(response);
  std::smatch m;
  switch (kind_) {
    case Kind::kGsm8k: {
      static const std::regex kLine(R"(#### (-?[0-9.,]+))");
      if (!std::regex_search(text, m, kLine)) return std::nullopt;
      return without(m[1].str(), ",$");
    }
    case Kind::kGsm8kFlexible: {
      std::optional<std::string> last;
      for (auto it = std::sregex_iterator(text.begin(), text.end(), number_run()); it != std::sregex_iterator(); ++it)
        if (const std::string s = it->str(); !s.empty() && s != ".") last = s;
      return last;
    }
    case Kind::kBoxed: return last_boxed(response);
    case Kind::kExact: return trimmed(response);
    case Kind::kRegex: {
      std::optional<std::string> last;
      for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern_); it != std::sregex_iterator(); ++it)
        last = it->size() > 1 ? (*it)[1].str() : it->str();
      return last;
    }
  }
  return std::nullopt;
}

std::string AnswerRule::reduce_reference(std::string_view reference) const {
  return extract(reference).value_or(std::string(reference));
}

double AnswerRule::score(std::string_view response, std::string_view reference, double format_score, double score) const {
  const std::optional<std::string> answer = extract(response);
  if (!answer) return 0;
  const std::string a = trimmed(*answer), ref = trimmed(reference);
  const bool numeric = kind_ == Kind::kGsm8k || kind_ == Kind::kGsm8kFlexible;
  if (a == ref || (numeric && same_number(without(a, ","), without(ref, ",")))) return score;
  return format_score;
}

double pass_at_k(int n, int c, int k) {
  ZT_CHECK(n >= 1 && c >= 0 && c <= n && k >= 1 && k <= n, "pass_at_k: n=", n, " c=", c, " k=", k);
  if (n - c < k) return 1.0;  // every k-subset holds a correct sample
  double none = 1.0;           // C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i)
  for (int i = n - c + 1; i <= n; ++i) none *= 1.0 - static_cast<double>(k) / i;
  return 1.0 - none;
}

EvalSummary summarize(std::span<const ScoredSample> scored, int samples) {
  ZT_CHECK(samples >= 1, "summarize: samples=", samples);
  EvalSummary s;
  std::map<std::size_t, int> correct;  // per prompt
  for (const ScoredSample& x : scored) {
    s.accuracy += x.score;
    correct[x.prompt] += x.score >= 1.0 ? 1 : 0;
  }
  if (scored.empty()) return s;
  s.accuracy /= static_cast<double>(scored.size());
  s.prompts = correct.size();
  for (const auto& [prompt, c] : correct) {
    s.pass_at_1 += pass_at_k(samples, c, 1);
    s.pass_at_samples += pass_at_k(samples, c, samples);
  }
  s.pass_at_1 /= static_cast<double>(s.prompts);
  s.pass_at_samples /= static_cast<double>(s.prompts);
  return s;
}

}  // namespace zt::gen
