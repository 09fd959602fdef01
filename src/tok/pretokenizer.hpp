// GPT-2's pre-tokenizer without a regex engine. It finds the same pieces, in the same order, as
// tiktoken's `gpt2` pattern matched leftmost-first:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
#pragma once

#include <cstddef>
#include <string_view>

#include "tok/unicode.hpp"

namespace zt::tok {

class PreTokenizer {
 public:
  explicit PreTokenizer(const CharClassTable& classes) : classes_(&classes) {}

  // End offset of the piece that starts at `pos` (< text.size()); `text` must be valid UTF-8 and
  // `pos` a character boundary. Pieces never depend on text before `pos`.
  std::size_t piece_end(std::string_view text, std::size_t pos) const;

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
  Char char_at(const unsigned char* p) const {
    if (*p < 0x80) return {classes_->ascii()[*p], 1};
    std::size_t len;
    const char32_t cp = decode_valid_utf8(p, len);
    return {classes_->of(cp), len};
  }
  // End of the run of characters of class `cls` starting at pos.
  std::size_t run_end(std::string_view text, std::size_t pos, CharClass cls) const;
  std::size_t space_run_end(std::string_view text, std::size_t pos) const;

  const CharClassTable* classes_;
};

}  // namespace zt::tok
