// cl100k's scanner (also Llama 3's pattern; Qwen2's with max_digits 1):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// The possessive spelling of newer tiktoken releases matches the same: no alternative here ever
// succeeds by giving back what an optional prefix or a punctuation run took.
#include "tok/pretokenizer.hpp"

namespace zt::tok {
namespace {

// [\r\n]* after a punctuation run.
std::size_t line_breaks_end(std::string_view text, std::size_t pos) {
  while (pos < text.size() && (text[pos] == '\r' || text[pos] == '\n')) ++pos;
  return pos;
}

}  // namespace

std::size_t PreTokenizer::piece_end_cl100k(std::string_view text, std::size_t pos) const {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  if (p[pos] == '\'') {  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    const std::size_t len = contraction_length_any_case(text, pos);
    if (len > 0) return pos + len;
  }
  const Char first = char_at(p + pos);
  const std::size_t next = pos + first.len;
  if (first.cls == CharClass::kLetter) return run_end(text, next, CharClass::kLetter);  // \p{L}+
  // [^\r\n\p{L}\p{N}]\p{L}+: any other character but a line break may lead a word.
  if (first.cls != CharClass::kNumber && p[pos] != '\r' && p[pos] != '\n' && next < n) {
    const Char second = char_at(p + next);
    if (second.cls == CharClass::kLetter) return run_end(text, next + second.len, CharClass::kLetter);
  }
  if (first.cls == CharClass::kNumber) return digits_end(text, pos);  // \p{N}{1,3}
  if (first.cls == CharClass::kOther)                                 // [^\s\p{L}\p{N}]+[\r\n]*
    return line_breaks_end(text, run_end(text, next, CharClass::kOther));
  if (p[pos] == ' ' && next < n) {  // " [^\s\p{L}\p{N}]+[\r\n]*"
    const Char second = char_at(p + next);
    if (second.cls == CharClass::kOther)
      return line_breaks_end(text, run_end(text, next + second.len, CharClass::kOther));
  }
  return space_or_newline_end(text, pos);
}

}  // namespace zt::tok
