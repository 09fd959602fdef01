// Character classes of the pre-tokenizer patterns for every code point, as tiktoken's Rust regex sees
// them (Unicode 16.0): GPT-2's and cl100k's \p{L}, \p{N}, \s, everything else, and the finer
// categories o200k needs (\p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} \p{M}); UTF-8 helpers for valid text.
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

// The finer category: its two low bits are the CharClass (category_class), so one table serves both.
// Marks are \p{M} (Mn Mc Me), in CharClass kOther as GPT-2's and cl100k's patterns see them.
enum class Category : std::uint8_t {
  kOther = 0,
  kUpper = 1,          // Lu
  kNumber = 2,         // \p{N}
  kSpace = 3,          // White_Space
  kMark = 4,           // \p{M}
  kLower = 5,          // Ll
  kTitle = 9,          // Lt
  kModifier = 13,      // Lm
  kOtherLetter = 17,   // Lo
};
inline constexpr CharClass category_class(Category c) { return static_cast<CharClass>(static_cast<unsigned>(c) & 3u); }
// Bit i set when category i is in the set: tests are one shift and one AND.
inline constexpr std::uint32_t category_bit(Category c) { return std::uint32_t{1} << static_cast<unsigned>(c); }

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

// White_Space (PropList.txt, unchanged from Unicode 6.3 to 16.0): what Rust regex's \s matches.
bool is_white_space(char32_t cp);

// Class of each code point: utf8proc's general categories (Unicode 15.0 in Debian 12) plus the
// letters, numbers and marks Unicode 16.0 added (the version of tiktoken 1.0.22's regex tables).
class CharClassTable {
 public:
  CharClassTable();
  Category category(char32_t cp) const {
    if (cp > kMaxCodePoint) return Category::kOther;
    return static_cast<Category>(blocks_[stage1_[cp >> 8] * 256u + (cp & 255u)]);
  }
  CharClass of(char32_t cp) const { return category_class(category(cp)); }
  // Classes and categories of the 128 ASCII code points, for the scanners' fast paths.
  const std::array<CharClass, 128>& ascii() const { return ascii_; }
  const std::array<Category, 128>& ascii_categories() const { return ascii_categories_; }

 private:
  std::vector<std::uint16_t> stage1_;  // [0x1100] block index per 256 code points
  std::vector<std::uint8_t> blocks_;   // [n_blocks * 256] distinct blocks of Category values
  std::array<CharClass, 128> ascii_;
  std::array<Category, 128> ascii_categories_;
};

// A code point range [first, last] that Unicode 16.0 assigned (utf8proc 2.8 says Cn) as a letter,
// number or mark.
struct CategoryOverride {
  char32_t first;
  char32_t last;
  Category category;
};
// The overlay applied on top of utf8proc; tests compare the result with Unicode 16.0 data.
const std::vector<CategoryOverride>& unicode16_overrides();

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
