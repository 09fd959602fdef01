// The cl100k and o200k scanners against hand-worked matches of their patterns (pattern.hpp), and the
// names and regex texts that select a kind. tests/reference/tiktoken checks both against tiktoken.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tok/pattern.hpp"
#include "tok/pretokenizer.hpp"

namespace zt::tok {
namespace {

using Pieces = std::vector<std::string>;

const CharClassTable& kinds_table() {
  static const CharClassTable kTable;
  return kTable;
}

Pieces pieces(std::string_view text, Pattern pattern) {
  Pieces out;
  PreTokenizer(kinds_table(), pattern).for_each_piece(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}
Pieces cl100k(std::string_view text) { return pieces(text, {PatternKind::kCl100k, 3}); }
Pieces o200k(std::string_view text) { return pieces(text, {PatternKind::kO200k, 3}); }

TEST(PreTokenizerCl100k, ContractionsInAnyCase) {
  EXPECT_EQ(cl100k("I'M YOU'RE it's"), (Pieces{"I", "'M", " YOU", "'RE", " it", "'s"}));
  EXPECT_EQ(cl100k("'Ll'vE'D"), (Pieces{"'Ll", "'vE", "'D"}));
  EXPECT_EQ(cl100k("a'\xC5\xBF"), (Pieces{"a", "'\xC5\xBF"}));  // U+017F folds to s
  EXPECT_EQ(cl100k("'sa"), (Pieces{"'s", "a"}));               // the first alternative wins
}

TEST(PreTokenizerCl100k, AnyNonLineBreakLeadsAWord) {
  EXPECT_EQ(cl100k("(abc \tdef"), (Pieces{"(abc", " ", "\tdef"}));
  EXPECT_EQ(cl100k("((abc"), (Pieces{"((", "abc"}));
  EXPECT_EQ(cl100k("\nabc"), (Pieces{"\n", "abc"}));
  EXPECT_EQ(cl100k("1abc"), (Pieces{"1", "abc"}));
}

TEST(PreTokenizerCl100k, DigitsInThrees) {
  EXPECT_EQ(cl100k("1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(pieces("1234", {PatternKind::kCl100k, 1}), (Pieces{"1", "2", "3", "4"}));
  EXPECT_EQ(cl100k(" 12"), (Pieces{" ", "12"}));
}

TEST(PreTokenizerCl100k, LineBreaks) {
  EXPECT_EQ(cl100k("a\r\n\r\nb"), (Pieces{"a", "\r\n\r\n", "b"}));
  EXPECT_EQ(cl100k("x!!\n\ny"), (Pieces{"x", "!!\n\n", "y"}));
  EXPECT_EQ(cl100k("a  \n  b"), (Pieces{"a", "  \n", " ", " b"}));
  EXPECT_EQ(cl100k("a \n \n b"), (Pieces{"a", " \n \n", " b"}));
  EXPECT_EQ(cl100k("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(cl100k("end  "), (Pieces{"end", "  "}));
}

TEST(PreTokenizerO200k, CaseRunsSplitWords) {
  EXPECT_EQ(o200k("HelloWorld"), (Pieces{"Hello", "World"}));
  EXPECT_EQ(o200k("helloWORLD"), (Pieces{"hello", "WORLD"}));
  EXPECT_EQ(o200k("HELLOworld"), (Pieces{"HELLOworld"}));
  EXPECT_EQ(o200k(" JSONParser"), (Pieces{" JSONParser"}));
}

TEST(PreTokenizerO200k, ContractionsStayWithTheirWord) {
  EXPECT_EQ(o200k("don't HE'LL"), (Pieces{"don't", " HE'LL"}));
  EXPECT_EQ(o200k("'s"), (Pieces{"'s"}));  // the apostrophe as the optional prefix
  EXPECT_EQ(o200k("x'y"), (Pieces{"x", "'y"}));
}

TEST(PreTokenizerO200k, MarksAreInBothCaseSetsAndLeadWords) {
  EXPECT_EQ(o200k("e\xCC\x81t\xC3\xA9"), (Pieces{"e\xCC\x81t\xC3\xA9"}));  // e + U+0301: one word
  // U+0301 then capitals: with the mark as prefix no lower-case follows; without it, the mark is
  // the W+ the first alternative needs, and that alternative wins with the mark alone.
  EXPECT_EQ(o200k("\xCC\x81" "AB"), (Pieces{"\xCC\x81", "AB"}));
  EXPECT_EQ(o200k("!!\xCC\x81"), (Pieces{"!!\xCC\x81"}));  // after punctuation it is punctuation
}

TEST(PreTokenizerO200k, PunctuationTakesLineBreaksAndSlashes) {
  EXPECT_EQ(o200k("a/b"), (Pieces{"a", "/b"}));
  EXPECT_EQ(o200k("x!!/\n/y"), (Pieces{"x", "!!/\n/", "y"}));
  EXPECT_EQ(o200k("12345"), (Pieces{"123", "45"}));
}

TEST(Pattern, KindsByNameAndByRegex) {
  for (const PatternKind kind : {PatternKind::kGpt2, PatternKind::kCl100k, PatternKind::kO200k}) {
    const Pattern p{kind, 3};
    EXPECT_EQ(pattern_by_name(pattern_name(p)), p);
    EXPECT_EQ(pattern_from_regex(pattern_regex(p)), p);
  }
  EXPECT_EQ(pattern_by_name("cl100k_base"), (Pattern{PatternKind::kCl100k, 3}));
  EXPECT_EQ(pattern_by_name("llama3"), std::nullopt);
  // Llama 3's tokenizer.json carries cl100k's regex; Qwen2's the same with \p{N}; newer Python
  // tiktoken the possessive spelling.
  EXPECT_EQ(pattern_from_regex(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
            (Pattern{PatternKind::kCl100k, 1}));
  EXPECT_EQ(pattern_from_regex(R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"),
            (Pattern{PatternKind::kCl100k, 3}));
  EXPECT_EQ(pattern_from_regex(R"(\s+|\w+)"), std::nullopt);
  EXPECT_EQ(pattern_name({PatternKind::kCl100k, 1}), "cl100k/digits=1");
}

}  // namespace
}  // namespace zt::tok
