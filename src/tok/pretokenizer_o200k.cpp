// o200k's scanner. With U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}],
// P = [^\r\n\p{L}\p{N}] and C = (?i:'s|'t|'re|'ve|'m|'ll|'d):
//   P?U*W+C? | P?U+W*C? | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// Lm, Lo and marks are in both U and W, and a mark is also in P, so the first two alternatives
// backtrack in ways the code below follows step by step (with P tried first, then without it).
#include "tok/pretokenizer.hpp"

namespace zt::tok {
namespace {

constexpr std::uint32_t kUpperSet = category_bit(Category::kUpper) | category_bit(Category::kTitle) |
                                    category_bit(Category::kModifier) | category_bit(Category::kOtherLetter) |
                                    category_bit(Category::kMark);
constexpr std::uint32_t kLowerSet = category_bit(Category::kLower) | category_bit(Category::kModifier) |
                                    category_bit(Category::kOtherLetter) | category_bit(Category::kMark);

std::size_t with_contraction(std::string_view text, std::size_t pos) {
  return pos < text.size() ? pos + contraction_length_any_case(text, pos) : pos;
}

// [\r\n/]* after a punctuation run.
std::size_t line_breaks_or_slashes_end(std::string_view text, std::size_t pos) {
  while (pos < text.size() && (text[pos] == '\r' || text[pos] == '\n' || text[pos] == '/')) ++pos;
  return pos;
}

}  // namespace

// U*W+C? (lower_required) or U+W*C? from q; npos when it does not match there.
std::size_t PreTokenizer::cased_run_from(std::string_view text, std::size_t q, bool lower_required) const {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size(), kNone = std::string_view::npos;
  std::size_t upper_end = q, last_lower_end = kNone;  // U*'s greedy run; end of its last W character
  while (upper_end < n) {
    const CatChar c = category_at(p + upper_end);
    const std::uint32_t bit = category_bit(c.cat);
    if ((bit & kUpperSet) == 0) break;
    upper_end += c.len;
    if (bit & kLowerSet) last_lower_end = upper_end;
  }
  std::size_t lower_end = upper_end;  // W's greedy run after it (starts with an Ll, if anything)
  while (lower_end < n) {
    const CatChar c = category_at(p + lower_end);
    if ((category_bit(c.cat) & kLowerSet) == 0) break;
    lower_end += c.len;
  }
  if (!lower_required) return upper_end == q ? kNone : with_contraction(text, lower_end);
  if (lower_end > upper_end) return with_contraction(text, lower_end);
  // W+ found nothing after U*'s run: U* gives back characters until W+ can take one, the run's last
  // W character; W+ cannot grow past it (what follows it in the run is Lu or Lt).
  if (last_lower_end == kNone) return kNone;
  return last_lower_end == upper_end ? with_contraction(text, upper_end) : last_lower_end;
}

std::size_t PreTokenizer::cased_letters_end(std::string_view text, std::size_t pos) const {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const CatChar first = category_at(p + pos);
  const CharClass cls = category_class(first.cat);
  const bool prefix = (cls == CharClass::kOther || cls == CharClass::kSpace) && p[pos] != '\r' && p[pos] != '\n';
  for (const bool lower_required : {true, false}) {  // the first alternative, then the second
    if (prefix) {
      const std::size_t end = cased_run_from(text, pos + first.len, lower_required);
      if (end != std::string_view::npos) return end;
    }
    const std::size_t end = cased_run_from(text, pos, lower_required);
    if (end != std::string_view::npos) return end;
  }
  return std::string_view::npos;
}

std::size_t PreTokenizer::piece_end_o200k(std::string_view text, std::size_t pos) const {
  const std::size_t letters = cased_letters_end(text, pos);
  if (letters != std::string_view::npos) return letters;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const Char first = char_at(p + pos);
  const std::size_t next = pos + first.len;
  if (first.cls == CharClass::kNumber) return digits_end(text, pos);  // \p{N}{1,3}
  if (first.cls == CharClass::kOther)                                 // [^\s\p{L}\p{N}]+[\r\n/]*
    return line_breaks_or_slashes_end(text, run_end(text, next, CharClass::kOther));
  if (p[pos] == ' ' && next < text.size()) {  // " [^\s\p{L}\p{N}]+[\r\n/]*"
    const Char second = char_at(p + next);
    if (second.cls == CharClass::kOther)
      return line_breaks_or_slashes_end(text, run_end(text, next + second.len, CharClass::kOther));
  }
  return space_or_newline_end(text, pos);
}

}  // namespace zt::tok
