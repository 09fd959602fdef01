// Verifiable answers (answers.hpp).
#include "gen/answers.hpp"

#include <pthread.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <map>

#include "core/error.hpp"

namespace zt::gen {
namespace {

std::string trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1));
}

// verl's GSM8K rules read only a response's last 300 characters (code points), where the final answer is.
constexpr std::size_t kGsm8kClipChars = 300;
// A regex rule reads at most a response's last 256 KiB, on a thread whose stack holds std::regex's
// recursion (about 400 bytes a character matched by a quantifier): a long response never overflows it.
constexpr std::size_t kRegexTextBytes = 256 * 1024;
constexpr std::size_t kRegexInlineBytes = 2048;  // shorter texts run on the caller's stack
constexpr std::size_t kRegexStackBytes = std::size_t{256} << 20;

bool continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The last `chars` code points of UTF-8 text (Python's text[-chars:]).
std::string_view last_chars(std::string_view text, std::size_t chars) {
  std::size_t at = text.size();
  for (std::size_t n = 0; at > 0 && n < chars; ++n)
    do --at;
    while (at > 0 && continuation_byte(text[at]));
  return text.substr(at);
}

// The last `bytes` bytes of UTF-8 text, cut at a character's start.
std::string_view last_bytes(std::string_view text, std::size_t bytes) {
  if (text.size() <= bytes) return text;
  std::size_t at = text.size() - bytes;
  while (at < text.size() && continuation_byte(text[at])) ++at;
  return text.substr(at);
}

bool number_char(char c) { return (c >= '0' && c <= '9') || c == '.' || c == ','; }

// The match of GSM8K's number pattern -?[0-9.,]+ starting at `at`, or an empty view.
std::string_view number_at(std::string_view text, std::size_t at) {
  std::size_t end = at + (at < text.size() && text[at] == '-' ? 1 : 0);
  const std::size_t digits = end;
  while (end < text.size() && number_char(text[end])) ++end;
  return end > digits ? text.substr(at, end - at) : std::string_view();
}

// A number match less the full stop of the sentence it ends ("is 2.5." gives 2.5, as "is 72." gives 72):
// the pattern takes the stop in, and only an integer followed by one would still read as a number.
std::string_view without_full_stop(std::string_view n) {
  const bool digits = n.find_first_of("0123456789") != std::string_view::npos;
  return digits && n.back() == '.' ? n.substr(0, n.size() - 1) : n;
}

bool digit(char c) { return c >= '0' && c <= '9'; }

// A number's canonical text, or none when `s` is not a plain decimal number: an optional sign, digits
// whose commas (if any) group thousands ("1,234,567"; "1,2" is a list, not twelve), an optional '.' and
// fraction digits ("-3.50", ".5", "72."), an optional exponent ("1e3", "2.5E-4", at most 9 digits). No
// hex, inf or nan (strtod's syntax read "0x1F" as 31). The canonical text is the value's sign, its
// significant digits and the power of ten they scale by ("0.18e2" for "18.0" and "1.8e1"), so two numbers
// are equal exactly when their texts are, at any size (past 2^53 too, where doubles merged neighbours).
std::optional<std::string> canonical_number(std::string_view s) {
  std::size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  std::string digits;
  while (i < s.size() && digit(s[i])) digits += s[i++];
  if (i < s.size() && s[i] == ',') {  // thousands groups: 1-3 digits, then ",ddd" groups
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    while (i < s.size() && s[i] == ',') {
      if (i + 3 >= s.size() || !digit(s[i + 1]) || !digit(s[i + 2]) || !digit(s[i + 3])) return std::nullopt;
      digits.append(s.substr(i + 1, 3));
      i += 4;
    }
    if (i < s.size() && digit(s[i])) return std::nullopt;  // "1,2345"
  }
  auto point = static_cast<std::int64_t>(digits.size());  // the decimal point's place in `digits`
  if (i < s.size() && s[i] == '.')
    for (++i; i < s.size() && digit(s[i]);) digits += s[i++];
  if (digits.empty()) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    const bool down = i < s.size() && (s[i] == '+' || s[i] == '-') && s[i++] == '-';
    std::int64_t exponent = 0;
    std::size_t n = 0;
    for (; i < s.size() && digit(s[i]) && n < 10; ++i, ++n) exponent = exponent * 10 + (s[i] - '0');
    if (n == 0 || n > 9) return std::nullopt;
    point += down ? -exponent : exponent;
  }
  if (i != s.size()) return std::nullopt;
  const std::size_t lead = std::min(digits.find_first_not_of('0'), digits.size());
  digits.erase(0, lead);
  point -= static_cast<std::int64_t>(lead);
  digits.erase(std::min(digits.find_last_not_of('0') + 1, digits.size()));
  if (digits.empty()) return "0";  // -0, 0.000, 0e5
  return cat(negative ? "-" : "", "0.", digits, "e", point);
}

// A number with its thousands commas dropped ("1,234" as 1234); any other text as it is.
std::string ungrouped(std::string_view n) {
  if (n.find(',') == std::string_view::npos || !canonical_number(n)) return std::string(n);
  std::string out;
  for (char c : n)
    if (c != ',') out += c;
  return out;
}

// A number as a reference states it whole: a plain number or a fraction of two ("3/4"); it is its own
// answer, never reduced to a piece of it.
bool plain_number_or_fraction(std::string_view s) {
  const std::size_t slash = s.find('/');
  if (slash == std::string_view::npos) return canonical_number(s).has_value();
  return canonical_number(s.substr(0, slash)) && canonical_number(s.substr(slash + 1));
}

// Runs f on a thread with a stack of kRegexStackBytes (std::regex recurses per character) and returns
// its result; an exception comes back to the caller.
using Extraction = std::function<std::optional<std::string>()>;
std::optional<std::string> on_large_stack(const Extraction& f) {
  struct Job {
    const Extraction* f;
    std::optional<std::string> result;
    std::exception_ptr error;
  } job{&f, std::nullopt, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kRegexStackBytes);
  pthread_t thread;
  const int rc = pthread_create(
      &thread, &attr,
      [](void* p) -> void* {
        Job& j = *static_cast<Job*>(p);
        try {
          j.result = (*j.f)();
        } catch (...) {
          j.error = std::current_exception();
        }
        return nullptr;
      },
      &job);
  pthread_attr_destroy(&attr);
  if (rc != 0) throw Error(cat("answer rule: cannot start the regex thread (", std::strerror(rc), ")"));
  pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
  return job.result;
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

// Both are plain numbers (canonical_number) of the same value: "18" and "18.0", "-3" and "-3.00", "1,234"
// and "1234".
bool same_number(std::string_view a, std::string_view b) {
  const std::optional<std::string> x = canonical_number(a);
  return x && x == canonical_number(b);
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
  switch (kind_) {
    case Kind::kGsm8k: {  // the last "#### N" of the last 300 characters
      const std::string_view text = last_chars(response, kGsm8kClipChars);
      std::optional<std::string> last;
      for (std::size_t at = text.find("#### "); at != std::string_view::npos; at = text.find("#### ", at + 1))
        if (const std::string_view n = number_at(text, at + 5); !n.empty()) last = ungrouped(without_full_stop(n));
      return last;
    }
    case Kind::kGsm8kFlexible: {  // the last number of the last 300 characters that is not "."
      const std::string_view text = last_chars(response, kGsm8kClipChars);
      std::optional<std::string> first, last;
      for (std::size_t at = 0; at < text.size();) {
        const std::string_view n = number_at(text, at);
        if (n.empty()) {
          ++at;
          continue;
        }
        if (!first) first = std::string(n);
        if (n != ".") last = std::string(without_full_stop(n));
        at += n.size();
      }
      return last ? last : first;  // verl's loop: every match "." leaves the first
    }
    case Kind::kBoxed: return last_boxed(response);
    case Kind::kExact: return trimmed(response);
    case Kind::kRegex: {
      const std::string text(last_bytes(response, kRegexTextBytes));
      const Extraction last_match = [&]() -> std::optional<std::string> {
        std::optional<std::string> last;
        for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern_); it != std::sregex_iterator(); ++it)
          last = it->size() > 1 ? (*it)[1].str() : it->str();
        return last;
      };
      return text.size() <= kRegexInlineBytes ? last_match() : on_large_stack(last_match);
    }
  }
  return std::nullopt;
}

std::string AnswerRule::reduce_reference(std::string_view reference) const {
  if (plain_number_or_fraction(trimmed(reference))) return std::string(reference);
  return extract(reference).value_or(std::string(reference));
}

double AnswerRule::score(std::string_view response, std::string_view reference, double format_score, double score) const {
  const std::optional<std::string> answer = extract(response);
  if (!answer) return 0;
  const std::string a = trimmed(*answer), ref = trimmed(reference);
  const bool numeric = kind_ != Kind::kExact;
  if (a == ref || (numeric && same_number(a, ref))) return score;
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
