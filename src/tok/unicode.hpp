// Character classes of GPT-2's pre-tokenizer pattern (\p{L}, \p{N}, \s, everything else) for every code
// point, as tiktoken's Rust regex sees them (Unicode 16.0), and UTF-8 helpers for valid text.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zt::tok {

enum class CharClass : std::uint8_t {
  kOther = 0,   // [^\s\p{L}\p{N}]
  kLetter = 1,  // \p{L}: general categories Lu Ll Lt Lm Lo
  kNumber = 2,  // \p{N}: Nd Nl No
  kSpace = 3,   // \s in Rust regex = the White_Space property (not U+FEFF, not U+001C..U+001F)
};

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

// White_Space (PropList.txt, unchanged from Unicode 6.3 to 16.0): what Rust regex's \s matches.
bool is_white_space(char32_t cp);

// Class of each code point: utf8proc's general categories (Unicode 15.0 in Debian 12) plus the
// letters and numbers Unicode 16.0 added (the version of tiktoken 1.0.22's regex tables).
class CharClassTable {
 public:
  CharClassTable();
  CharClass of(char32_t cp) const {
    if (cp > kMaxCodePoint) return CharClass::kOther;
    return static_cast<CharClass>(blocks_[stage1_[cp >> 8] * 256u + (cp & 255u)]);
  }
  // Classes of the 128 ASCII code points, for the scanner's fast path.
  const std::array<CharClass, 128>& ascii() const { return ascii_; }

 private:
  std::vector<std::uint16_t> stage1_;  // [0x1100] block index per 256 code points
  std::vector<std::uint8_t> blocks_;   // [n_blocks * 256] distinct blocks
  std::array<CharClass, 128> ascii_;
};

// A code point range [first, last] that Unicode 16.0 made a letter or number (utf8proc 2.8 says Cn).
struct ClassOverride {
  char32_t first;
  char32_t last;
  CharClass cls;
};
// The overlay applied on top of utf8proc; tests compare the result with Unicode 16.0 data.
const std::vector<ClassOverride>& unicode16_overrides();

// Decodes the code point starting at p in VALID UTF-8 and sets len to its byte count (1..4).
inline char32_t decode_valid_utf8(const unsigned char* p, std::size_t& len) {
  const unsigned b0 = p[0];
  if (b0 < 0x80) { len = 1; return b0; }
  if (b0 < 0xE0) { len = 2; return ((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu); }
  if (b0 < 0xF0) { len = 3; return ((b0 & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu); }
  len = 4;
  return ((b0 & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
}

// Appends the UTF-8 encoding of cp (a Unicode scalar value) to out.
void append_utf8(char32_t cp, std::string& out);

}  // namespace zt::tok
