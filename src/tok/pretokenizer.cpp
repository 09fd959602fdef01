// GPT-2's scanner and the parts the scanners share: at each position the pattern's alternatives are
// tried in order, as a backtracking regex engine does; each branch names the alternative it implements.
#include "tok/pretokenizer.hpp"

namespace zt::tok {
namespace {

// 's 't 'm 'd (2 bytes) and 're 've 'll (3 bytes), lower case only; 0 when none starts at pos.
std::size_t contraction_length(std::string_view text, std::size_t pos) {
  if (pos + 1 >= text.size()) return 0;
  const char c1 = text[pos + 1];
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 >= text.size()) return 0;
  const char c2 = text[pos + 2];
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

bool is_ascii_letter(unsigned char c) { return static_cast<unsigned char>((c | 0x20) - 'a') < 26; }

}  // namespace

std::size_t PreTokenizer::run_end(std::string_view text, std::size_t pos, CharClass cls) const {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  if (cls == CharClass::kLetter)  // the common case: ASCII words
    while (pos < n && is_ascii_letter(p[pos])) ++pos;
  while (pos < n) {
    const Char c = char_at(p + pos);
    if (c.cls != cls) break;
    pos += c.len;
  }
  return pos;
}

// `\s+(?!\S)|\s+`: the greedy run, given back one character when a non-space follows it.
std::size_t PreTokenizer::space_run_end(std::string_view text, std::size_t pos) const {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  const std::size_t start = pos;
  std::size_t last = pos;  // start of the run's last character
  while (pos < n) {
    const Char c = char_at(p + pos);
    if (c.cls != CharClass::kSpace) break;
    last = pos;
    pos += c.len;
  }
  if (pos == n) return n;         // \s+(?!\S) at the end of the text
  if (last > start) return last;  // \s+(?!\S) after backtracking one character
  return pos;                     // a single space character before a non-space: \s+
}

std::size_t PreTokenizer::space_or_newline_end(std::string_view text, std::size_t pos) const {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t end = pos, after_newline = 0;
  while (end < n) {
    const Char c = char_at(p + end);
    if (c.cls != CharClass::kSpace) break;
    if (p[end] == '\r' || p[end] == '\n') after_newline = end + 1;
    end += c.len;
  }
  // \s*[\r\n]+: \s* gives back characters until [\r\n]+ can match, i.e. up to the run's last line
  // break, which [\r\n]+ takes (nothing after it in the run is \r or \n).
  if (after_newline > 0) return after_newline;
  return space_run_end(text, pos);
}

std::size_t PreTokenizer::digits_end(std::string_view text, std::size_t pos) const {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (unsigned k = 0; k < pattern_.max_digits && pos < text.size(); ++k) {
    const Char c = char_at(p + pos);
    if (c.cls != CharClass::kNumber) break;
    pos += c.len;
  }
  return pos;
}

std::size_t contraction_length_any_case(std::string_view text, std::size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  if (p[pos] != '\'' || pos + 1 >= n) return 0;
  const unsigned char c1 = p[pos + 1] | 0x20;  // ASCII letters to lower case
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 >= n) return 0;
  if (p[pos + 1] == 0xC5 && p[pos + 2] == 0xBF) return 3;  // U+017F LATIN SMALL LETTER LONG S
  const unsigned char c2 = p[pos + 2] | 0x20;
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

std::size_t PreTokenizer::piece_end_gpt2(std::string_view text, std::size_t pos) const {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  if (p[pos] == '\'') {  // 's|'t|'re|'ve|'m|'ll|'d
    const std::size_t len = contraction_length(text, pos);
    if (len > 0) return pos + len;
  }
  const Char first = char_at(p + pos);
  if (first.cls != CharClass::kSpace) return run_end(text, pos + first.len, first.cls);
  if (p[pos] == ' ' && pos + 1 < text.size()) {  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+"
    const Char next = char_at(p + pos + 1);
    if (next.cls != CharClass::kSpace) return run_end(text, pos + 1 + next.len, next.cls);
  }
  return space_run_end(text, pos);
}

}  // namespace zt::tok
