// Builds the two-stage code point -> CharClass table from utf8proc and the Unicode 16.0 overlay.
#include "tok/unicode.hpp"

#include <map>
#include <string>

#include <utf8proc.h>

namespace zt::tok {
namespace {

CharClass class_from_utf8proc(char32_t cp) {
  if (is_white_space(cp)) return CharClass::kSpace;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
      return CharClass::kLetter;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return CharClass::kNumber;
    default:
      return CharClass::kOther;
  }
}

}  // namespace

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Code points whose \p{L} / \p{N} membership differs between utf8proc 2.8.0 (Unicode 15.0) and
// Unicode 16.0 (regenerate-unicode-properties@10.2.0). All are new assignments: Cn -> L or N.
// Regenerate with tests/reference/tiktoken/unicode-classes.mjs; the reference test checks every
// code point of this table against Unicode 16.0.
const std::vector<ClassOverride>& unicode16_overrides() {
  static const std::vector<ClassOverride> kOverrides = {
      {0x1C89, 0x1C8A, CharClass::kLetter},   {0xA7CB, 0xA7CD, CharClass::kLetter},
      {0xA7DA, 0xA7DC, CharClass::kLetter},   {0x105C0, 0x105F3, CharClass::kLetter},
      {0x10D40, 0x10D49, CharClass::kNumber}, {0x10D4A, 0x10D65, CharClass::kLetter},
      {0x10D6F, 0x10D85, CharClass::kLetter}, {0x10EC2, 0x10EC4, CharClass::kLetter},
      {0x11380, 0x11389, CharClass::kLetter}, {0x1138B, 0x1138B, CharClass::kLetter},
      {0x1138E, 0x1138E, CharClass::kLetter}, {0x11390, 0x113B5, CharClass::kLetter},
      {0x113B7, 0x113B7, CharClass::kLetter}, {0x113D1, 0x113D1, CharClass::kLetter},
      {0x113D3, 0x113D3, CharClass::kLetter}, {0x116D0, 0x116E3, CharClass::kNumber},
      {0x11BC0, 0x11BE0, CharClass::kLetter}, {0x11BF0, 0x11BF9, CharClass::kNumber},
      {0x13460, 0x143FA, CharClass::kLetter}, {0x16100, 0x1611D, CharClass::kLetter},
      {0x16130, 0x16139, CharClass::kNumber}, {0x16D40, 0x16D6C, CharClass::kLetter},
      {0x16D70, 0x16D79, CharClass::kNumber}, {0x18CFF, 0x18CFF, CharClass::kLetter},
      {0x1CCF0, 0x1CCF9, CharClass::kNumber}, {0x1E5D0, 0x1E5ED, CharClass::kLetter},
      {0x1E5F0, 0x1E5F0, CharClass::kLetter}, {0x1E5F1, 0x1E5FA, CharClass::kNumber},
      {0x2EBF0, 0x2EE5D, CharClass::kLetter},
  };
  return kOverrides;
}

CharClassTable::CharClassTable() : stage1_((kMaxCodePoint + 1) >> 8) {
  std::vector<std::uint8_t> flat(kMaxCodePoint + 1);
  for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp)
    flat[cp] = static_cast<std::uint8_t>(class_from_utf8proc(cp));
  for (const ClassOverride& o : unicode16_overrides())
    for (char32_t cp = o.first; cp <= o.last; ++cp) flat[cp] = static_cast<std::uint8_t>(o.cls);

  std::map<std::string, std::uint16_t> seen;  // block bytes -> block index
  for (std::size_t b = 0; b < stage1_.size(); ++b) {
    std::string block(reinterpret_cast<const char*>(flat.data() + b * 256), 256);
    auto [it, inserted] = seen.emplace(block, static_cast<std::uint16_t>(seen.size()));
    if (inserted) blocks_.insert(blocks_.end(), block.begin(), block.end());
    stage1_[b] = it->second;
  }
  for (char32_t cp = 0; cp < 128; ++cp) ascii_[cp] = static_cast<CharClass>(flat[cp]);
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace zt::tok
