// Pre-tokenizers without a regex engine, one scanner per PatternKind (pattern.hpp). Each finds the
// same pieces, in the same order, as tiktoken's regex for it matched leftmost-first (Rust
// fancy-regex, Unicode 16.0 classes), possessive and look-ahead parts included.
//   gpt2:   pretokenizer.cpp        cl100k: pretokenizer_cl100k.cpp       o200k: pretokenizer_o200k.cpp
#pragma once

#include <cstddef>
#include <string_view>

#include "tok/pattern.hpp"
#include "tok/unicode.hpp"

namespace zt::tok {

class PreTokenizer {
 public:
  explicit PreTokenizer(const CharClassTable& classes, Pattern pattern = {})
      : classes_(&classes), pattern_(pattern) {}

  const Pattern& pattern() const { return pattern_; }

  // End offset of the piece that starts at `pos` (< text.size()); `text` must be valid UTF-8 and
  // `pos` a character boundary. Pieces never depend on text before `pos`.
  std::size_t piece_end(std::string_view text, std::size_t pos) const {
    switch (pattern_.kind) {
      case PatternKind::kCl100k: return piece_end_cl100k(text, pos);
      case PatternKind::kO200k: return piece_end_o200k(text, pos);
      case PatternKind::kGpt2: break;
    }
    return piece_end_gpt2(text, pos);
  }

  // Calls fn(piece) for every piece of `text` in order.
  template <typename Fn>
  void for_each_piece(std::string_view text, Fn&& fn) const {
    for (std::size_t pos = 0; pos < text.size();) {
      const std::size_t end = piece_end(text, pos);
      fn(text.substr(pos, end - pos));
      pos = end;
    }
  }

 private:
  struct Char {
    CharClass cls;
    std::size_t len;
  };
  struct CatChar {
    Category cat;
    std::size_t len;
  };
  Char char_at(const unsigned char* p) const {
    if (*p < 0x80) return {classes_->ascii()[*p], 1};
    std::size_t len;
    const char32_t cp = decode_valid_utf8(p, len);
    return {classes_->of(cp), len};
  }
  CatChar category_at(const unsigned char* p) const {
    if (*p < 0x80) return {classes_->ascii_categories()[*p], 1};
    std::size_t len;
    const char32_t cp = decode_valid_utf8(p, len);
    return {classes_->category(cp), len};
  }
  std::size_t piece_end_gpt2(std::string_view text, std::size_t pos) const;
  std::size_t piece_end_cl100k(std::string_view text, std::size_t pos) const;
  std::size_t piece_end_o200k(std::string_view text, std::size_t pos) const;

  // Shared by the scanners (pretokenizer.cpp).
  // End of the run of characters of class `cls` starting at pos.
  std::size_t run_end(std::string_view text, std::size_t pos, CharClass cls) const;
  // `\s+(?!\S)|\s+` at pos, which holds a white-space character.
  std::size_t space_run_end(std::string_view text, std::size_t pos) const;
  // cl100k and o200k: `\s*[\r\n]+|\s+(?!\S)|\s+` at pos, which holds a white-space character.
  std::size_t space_or_newline_end(std::string_view text, std::size_t pos) const;
  // `\p{N}{1,max_digits}` at pos, which holds a \p{N} character.
  std::size_t digits_end(std::string_view text, std::size_t pos) const;
  // o200k's letter alternatives from pos; npos when neither matches.
  std::size_t cased_letters_end(std::string_view text, std::size_t pos) const;
  std::size_t cased_run_from(std::string_view text, std::size_t q, bool lower_required) const;

  const CharClassTable* classes_;
  Pattern pattern_;
};

// Length of `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at pos (2 to 4 bytes; 0 when none): ASCII letters of
// either case, and U+017F (long s), which Rust regex's Unicode case folding matches for s.
std::size_t contraction_length_any_case(std::string_view text, std::size_t pos);

}  // namespace zt::tok
