// Metrics lines are JSON: json_string escapes quotes, backslashes and control bytes, keeps well-formed
// UTF-8 as is, and turns bytes that are not UTF-8 (a text sample cut inside a character, a lone byte
// token of an untrained model) into U+FFFD, so a reader's UTF-8 decoder never fails on the file.
#include <gtest/gtest.h>

#include <string>

#include "io/json_text.hpp"

namespace zt::io {
namespace {

TEST(JsonString, EscapesQuotesBackslashesAndControlBytes) {
  EXPECT_EQ(json_string("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\u000ad\\u0001\"");
}

TEST(JsonString, KeepsWellFormedUtf8) {
  const std::string text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xED\x9F\xBF \xF4\x8F\xBF\xBF";
  EXPECT_EQ(json_string(text), "\"" + text + "\"");
}

TEST(JsonString, ReplacesBytesThatAreNotUtf8) {
  EXPECT_EQ(json_string("a\xC3"), "\"a\\ufffd\"");               // cut inside a character
  EXPECT_EQ(json_string("\x80x"), "\"\\ufffdx\"");                // a lone continuation byte
  EXPECT_EQ(json_string("\xC0\xAF"), "\"\\ufffd\\ufffd\"");       // overlong '/'
  EXPECT_EQ(json_string("\xED\xA0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // a UTF-16 surrogate
  EXPECT_EQ(json_string("\xF4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // past U+10FFFF
  EXPECT_EQ(json_string("\xE2\x82 ok"), "\"\\ufffd\\ufffd ok\"");  // a 3-byte sequence missing its last
}

// A lone surrogate escape (half of an emoji cut off) reads as U+FFFD; pairs, other escapes and an escaped
// backslash before "u" stay as they are.
TEST(LoneSurrogates, BecomeTheReplacementCharacter) {
  std::string j = R"({"a": "x\ud83d", "b": "\ud83d\ude00", "c": "\ude00y", "d": "\\ud83d", "e": "\n\u0041"})";
  EXPECT_EQ(replace_lone_surrogate_escapes(j), 2u);
  EXPECT_EQ(j, R"({"a": "x\uFFFD", "b": "\ud83d\ude00", "c": "\uFFFDy", "d": "\\ud83d", "e": "\n\u0041"})");
  std::string end = R"("\ud83d)";  // at the very end, no room for a low half
  EXPECT_EQ(replace_lone_surrogate_escapes(end), 1u);
}

}  // namespace
}  // namespace zt::io
