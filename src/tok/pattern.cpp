// Pattern names and regex texts. Recognition is by exact text: a scanner implements one regex, and a
// regex that differs by a character may tokenize differently, so anything unknown is refused upstream.
#include "tok/pattern.hpp"

#include <array>

namespace zt::tok {
namespace {

constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The two patterns with their digit run as a placeholder "@" (\p{N}{1,3} in the encodings).
// tiktoken's JavaScript/Rust and Hugging Face spellings, then the possessive ones of Python tiktoken
// 0.7+ (same matches: the possessive parts never need to backtrack in these patterns).
constexpr std::array<std::string_view, 2> kCl100kTemplates = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|@| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|@| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)",
};
constexpr std::array<std::string_view, 1> kO200kTemplates = {
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(@| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

std::string digits_regex(unsigned max_digits) {
  return max_digits == 1 ? R"(\p{N})" : R"(\p{N}{1,)" + std::to_string(max_digits) + "}";
}

std::string filled(std::string_view templ, unsigned max_digits) {
  std::string out(templ);
  out.replace(out.find('@'), 1, digits_regex(max_digits));
  return out;
}

}  // namespace

std::optional<Pattern> pattern_by_name(std::string_view name) {
  if (name == "gpt2" || name == "r50k_base") return Pattern{PatternKind::kGpt2, 3};
  if (name == "cl100k" || name == "cl100k_base") return Pattern{PatternKind::kCl100k, 3};
  if (name == "o200k" || name == "o200k_base") return Pattern{PatternKind::kO200k, 3};
  return std::nullopt;
}

std::string pattern_name(const Pattern& pattern) {
  std::string name = pattern.kind == PatternKind::kGpt2     ? "gpt2"
                     : pattern.kind == PatternKind::kCl100k ? "cl100k"
                                                            : "o200k";
  if (pattern.kind != PatternKind::kGpt2 && pattern.max_digits != 3)
    name += "/digits=" + std::to_string(pattern.max_digits);
  return name;
}

std::string pattern_regex(const Pattern& pattern) {
  switch (pattern.kind) {
    case PatternKind::kGpt2: return std::string(kGpt2Regex);
    case PatternKind::kCl100k: return filled(kCl100kTemplates[0], pattern.max_digits);
    case PatternKind::kO200k: return filled(kO200kTemplates[0], pattern.max_digits);
  }
  return {};
}

std::optional<Pattern> pattern_from_regex(std::string_view regex) {
  if (regex == kGpt2Regex) return Pattern{PatternKind::kGpt2, 3};
  for (unsigned digits = 1; digits <= 9; ++digits) {
    for (std::string_view t : kCl100kTemplates)
      if (regex == filled(t, digits)) return Pattern{PatternKind::kCl100k, digits};
    for (std::string_view t : kO200kTemplates)
      if (regex == filled(t, digits)) return Pattern{PatternKind::kO200k, digits};
  }
  return std::nullopt;
}

}  // namespace zt::tok
