// The regex-free scanner against hand-worked matches of GPT-2's pattern.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tok/pretokenizer.hpp"

namespace zt::tok {
namespace {

using Pieces = std::vector<std::string>;

const CharClassTable& table() {
  static const CharClassTable kTable;
  return kTable;
}

Pieces pieces(std::string_view text) {
  Pieces out;
  PreTokenizer(table()).for_each_piece(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

TEST(PreTokenizer, WordsTakeTheirLeadingSpace) {
  EXPECT_EQ(pieces("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces(" a"), (Pieces{" a"}));
  EXPECT_EQ(pieces(""), Pieces{});
}

TEST(PreTokenizer, ContractionsAreLowerCaseOnly) {
  EXPECT_EQ(pieces("I'm"), (Pieces{"I", "'m"}));
  EXPECT_EQ(pieces("they're we've you'll he'd it's don't"),
            (Pieces{"they", "'re", " we", "'ve", " you", "'ll", " he", "'d", " it", "'s", " don", "'t"}));
  EXPECT_EQ(pieces("IT'S"), (Pieces{"IT", "'", "S"}));
  EXPECT_EQ(pieces("WE'RE"), (Pieces{"WE", "'", "RE"}));
  EXPECT_EQ(pieces("'ll've'"), (Pieces{"'ll", "'ve", "'"}));
  EXPECT_EQ(pieces("'sa"), (Pieces{"'s", "a"}));
  EXPECT_EQ(pieces(" 's"), (Pieces{" '", "s"}));    // the space takes the apostrophe as punctuation
  EXPECT_EQ(pieces("?'s"), (Pieces{"?'", "s"}));    // inside a punctuation run: no contraction
  EXPECT_EQ(pieces("'r"), (Pieces{"'", "r"}));
}

TEST(PreTokenizer, DigitsLettersAndPunctuationSplit) {
  EXPECT_EQ(pieces("abc123def"), (Pieces{"abc", "123", "def"}));
  EXPECT_EQ(pieces(" 2024!? x"), (Pieces{" 2024", "!?", " x"}));
  EXPECT_EQ(pieces(" ?!x"), (Pieces{" ?!", "x"}));
  EXPECT_EQ(pieces("\xC2\xBD\xC2\xB2"), (Pieces{"\xC2\xBD\xC2\xB2"}));  // U+00BD U+00B2: both \p{N}
}

TEST(PreTokenizer, SpaceRunsGiveTheirLastCharacterToTheNextWord) {
  EXPECT_EQ(pieces("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(pieces("a  \n\nb"), (Pieces{"a", "  \n", "\n", "b"}));
  EXPECT_EQ(pieces("a\tb"), (Pieces{"a", "\t", "b"}));
  EXPECT_EQ(pieces("a\r\nb"), (Pieces{"a", "\r", "\n", "b"}));
  EXPECT_EQ(pieces("a \tb"), (Pieces{"a", " ", "\t", "b"}));
  EXPECT_EQ(pieces("end   "), (Pieces{"end", "   "}));   // at the end the whole run stays
  EXPECT_EQ(pieces("   "), (Pieces{"   "}));
  EXPECT_EQ(pieces("  1"), (Pieces{" ", " 1"}));
}

TEST(PreTokenizer, UnicodeWhiteSpaceIsRustsWhiteSpaceProperty) {
  EXPECT_EQ(pieces("x\xC2\xA0y"), (Pieces{"x", "\xC2\xA0", "y"}));                 // U+00A0
  EXPECT_EQ(pieces("x \xC2\xA0y"), (Pieces{"x", " ", "\xC2\xA0", "y"}));
  EXPECT_EQ(pieces("x\xC2\x85\xC2\x85y"), (Pieces{"x", "\xC2\x85", "\xC2\x85", "y"})); // U+0085
  EXPECT_EQ(pieces("x\xE3\x80\x80y"), (Pieces{"x", "\xE3\x80\x80", "y"}));         // U+3000
  // U+FEFF (Cf) and U+001C (Cc) are not white space: they are punctuation-like "other".
  EXPECT_EQ(pieces("\xEF\xBB\xBFhi"), (Pieces{"\xEF\xBB\xBF", "hi"}));
  EXPECT_EQ(pieces(" \x1C\x1Dz"), (Pieces{" \x1C\x1D", "z"}));
}

TEST(PreTokenizer, MarksAreNotLetters) {
  EXPECT_EQ(pieces("e\xCC\x81t\xC3\xA9"), (Pieces{"e", "\xCC\x81", "t\xC3\xA9"}));  // e + U+0301
  EXPECT_EQ(pieces("\xE4\xB8\xAD\xE6\x96\x87 ok"), (Pieces{"\xE4\xB8\xAD\xE6\x96\x87", " ok"}));
}

TEST(PreTokenizer, Unicode16LettersAndNumbersAreClassified) {
  EXPECT_EQ(table().of(0x1C89), CharClass::kLetter);   // CYRILLIC CAPITAL LETTER TJE (16.0)
  EXPECT_EQ(table().of(0x10D40), CharClass::kNumber);  // GARAY DIGIT ZERO (16.0)
  EXPECT_EQ(table().of(0xFEFF), CharClass::kOther);
  EXPECT_EQ(table().of(0x0085), CharClass::kSpace);
  EXPECT_EQ(table().of(0x10FFFF), CharClass::kOther);
  EXPECT_EQ(pieces("a\xE1\xB2\x89's"), (Pieces{"a\xE1\xB2\x89", "'s"}));
}

}  // namespace
}  // namespace zt::tok
