// The pre-tokenisation patterns ztok implements (each by a hand-written scanner, no regex engine):
// a selectable kind, constructed by name ("gpt2", "cl100k", "o200k") or recognised from the regex text
// a tiktoken encoding or a Hugging Face tokenizer.json `Split` pre-tokenizer carries.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zt::tok {

enum class PatternKind : unsigned char {
  kGpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kCl100k,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
            //   \s*[\r\n]+|\s+(?!\S)|\s+                        (also Llama 3's; Qwen2's with \p{N})
  kO200k,   // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+C?|
            //   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*C?|
            //   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
            //   with C = (?i:'s|'t|'re|'ve|'m|'ll|'d)
};

struct Pattern {
  PatternKind kind = PatternKind::kGpt2;
  // cl100k and o200k: \p{N}{1,max_digits} (3; Qwen2's cl100k-like pattern has \p{N}, i.e. 1).
  // GPT-2's \p{N}+ takes whole runs and ignores it.
  unsigned max_digits = 3;

  friend bool operator==(const Pattern&, const Pattern&) = default;
};

// "gpt2", "cl100k" or "o200k" (also the encoding names "r50k_base", "cl100k_base", "o200k_base"), or
// nullopt. The digit run is the kind's own (3).
std::optional<Pattern> pattern_by_name(std::string_view name);
// "gpt2", "cl100k" or "o200k", with "/digits=N" appended when max_digits is not the kind's own.
std::string pattern_name(const Pattern& pattern);
// The regex text of the pattern, as tiktoken writes it (\p{N}{1,N} / \p{N} for other digit runs).
std::string pattern_regex(const Pattern& pattern);
// The pattern whose regex text is exactly `regex` (tiktoken's spellings, the possessive ones of newer
// tiktoken releases, and \p{N}{1,K} / \p{N} digit runs for K in 1..9), or nullopt when it is none
// of those: a tokenizer.json `Split` regex maps to a kind through this.
std::optional<Pattern> pattern_from_regex(std::string_view regex);

}  // namespace zt::tok
