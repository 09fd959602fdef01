// Builds the two-stage code point -> CharClass table from utf8proc and the Unicode 16.0 overlay.
#include "tok/unicode.hpp"

#include <map>
#include <string>

#include <utf8proc.h>

namespace zt::tok {
namespace {

Category category_from_utf8proc(char32_t cp) {
  if (is_white_space(cp)) return Category::kSpace;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: return Category::kUpper;
    case UTF8PROC_CATEGORY_LL: return Category::kLower;
    case UTF8PROC_CATEGORY_LT: return Category::kTitle;
    case UTF8PROC_CATEGORY_LM: return Category::kModifier;
    case UTF8PROC_CATEGORY_LO: return Category::kOtherLetter;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return Category::kNumber;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
      return Category::kMark;
    default:
      return Category::kOther;
  }
}

}  // namespace

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Code points whose category (as category_from_utf8proc sees it) differs between utf8proc 2.8.0
// (Unicode 15.0) and Unicode 16.0 (regenerate-unicode-properties@10.2.0): all are new assignments,
// Cn -> L*, N or M. The reference test compares every code point of the result with Unicode 16.0
// (tok_check categories) and lists the ranges that differ, in this form.
const std::vector<CategoryOverride>& unicode16_overrides() {
  using C = Category;
  static const std::vector<CategoryOverride> kOverrides = {
      {0x897, 0x897, C::kMark}, {0x1C89, 0x1C89, C::kUpper},
      {0x1C8A, 0x1C8A, C::kLower}, {0xA7CB, 0xA7CC, C::kUpper},
      {0xA7CD, 0xA7CD, C::kLower}, {0xA7DA, 0xA7DA, C::kUpper},
      {0xA7DB, 0xA7DB, C::kLower}, {0xA7DC, 0xA7DC, C::kUpper},
      {0x105C0, 0x105F3, C::kOtherLetter}, {0x10D40, 0x10D49, C::kNumber},
      {0x10D4A, 0x10D4D, C::kOtherLetter}, {0x10D4E, 0x10D4E, C::kModifier},
      {0x10D4F, 0x10D4F, C::kOtherLetter}, {0x10D50, 0x10D65, C::kUpper},
      {0x10D69, 0x10D6D, C::kMark}, {0x10D6F, 0x10D6F, C::kModifier},
      {0x10D70, 0x10D85, C::kLower}, {0x10EC2, 0x10EC4, C::kOtherLetter},
      {0x10EFC, 0x10EFC, C::kMark}, {0x11380, 0x11389, C::kOtherLetter},
      {0x1138B, 0x1138B, C::kOtherLetter}, {0x1138E, 0x1138E, C::kOtherLetter},
      {0x11390, 0x113B5, C::kOtherLetter}, {0x113B7, 0x113B7, C::kOtherLetter},
      {0x113B8, 0x113C0, C::kMark}, {0x113C2, 0x113C2, C::kMark},
      {0x113C5, 0x113C5, C::kMark}, {0x113C7, 0x113CA, C::kMark},
      {0x113CC, 0x113D0, C::kMark}, {0x113D1, 0x113D1, C::kOtherLetter},
      {0x113D2, 0x113D2, C::kMark}, {0x113D3, 0x113D3, C::kOtherLetter},
      {0x113E1, 0x113E2, C::kMark}, {0x116D0, 0x116E3, C::kNumber},
      {0x11BC0, 0x11BE0, C::kOtherLetter}, {0x11BF0, 0x11BF9, C::kNumber},
      {0x11F5A, 0x11F5A, C::kMark}, {0x13460, 0x143FA, C::kOtherLetter},
      {0x16100, 0x1611D, C::kOtherLetter}, {0x1611E, 0x1612F, C::kMark},
      {0x16130, 0x16139, C::kNumber}, {0x16D40, 0x16D42, C::kModifier},
      {0x16D43, 0x16D6A, C::kOtherLetter}, {0x16D6B, 0x16D6C, C::kModifier},
      {0x16D70, 0x16D79, C::kNumber}, {0x18CFF, 0x18CFF, C::kOtherLetter},
      {0x1CCF0, 0x1CCF9, C::kNumber}, {0x1E5D0, 0x1E5ED, C::kOtherLetter},
      {0x1E5EE, 0x1E5EF, C::kMark}, {0x1E5F0, 0x1E5F0, C::kOtherLetter},
      {0x1E5F1, 0x1E5FA, C::kNumber}, {0x2EBF0, 0x2EE5D, C::kOtherLetter},
  };
  return kOverrides;
}

CharClassTable::CharClassTable() : stage1_((kMaxCodePoint + 1) >> 8) {
  std::vector<std::uint8_t> flat(kMaxCodePoint + 1);
  for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp)
    flat[cp] = static_cast<std::uint8_t>(category_from_utf8proc(cp));
  for (const CategoryOverride& o : unicode16_overrides())
    for (char32_t cp = o.first; cp <= o.last; ++cp) flat[cp] = static_cast<std::uint8_t>(o.category);

  std::map<std::string, std::uint16_t> seen;  // block bytes -> block index
  for (std::size_t b = 0; b < stage1_.size(); ++b) {
    std::string block(reinterpret_cast<const char*>(flat.data() + b * 256), 256);
    auto [it, inserted] = seen.emplace(block, static_cast<std::uint16_t>(seen.size()));
    if (inserted) blocks_.insert(blocks_.end(), block.begin(), block.end());
    stage1_[b] = it->second;
  }
  for (char32_t cp = 0; cp < 128; ++cp) {
    ascii_categories_[cp] = static_cast<Category>(flat[cp]);
    ascii_[cp] = category_class(ascii_categories_[cp]);
  }
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
