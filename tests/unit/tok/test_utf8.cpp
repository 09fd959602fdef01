// UTF-8 repair: one U+FFFD per maximal ill-formed subpart, as Python's errors="replace".
#include <gtest/gtest.h>

#include "tok/utf8.hpp"

namespace zt::tok {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string repaired(std::string_view in, std::size_t* count = nullptr) {
  std::string out;
  const std::size_t n = append_replacing_invalid(in, out);
  if (count) *count = n;
  return out;
}

TEST(Utf8, ValidTextIsUntouched) {
  const std::string text = "plain ASCII, \xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80, \xF4\x8F\xBF\xBF";
  EXPECT_EQ(first_invalid_utf8(text), text.size());
  std::size_t n = 99;
  EXPECT_EQ(repaired(text, &n), text);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(first_invalid_utf8(""), 0u);
}

// The example of Unicode 16.0 §3.9, Table 3-8 ("U+FFFD for maximal subparts").
TEST(Utf8, MaximalSubpartsFollowTheStandardsExample) {
  std::size_t n = 0;
  const std::string out = repaired("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", &n);
  EXPECT_EQ(out, "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
  EXPECT_EQ(n, 6u);
}

struct Case {
  const char* name;
  std::string in;
  std::size_t replacements;
};

TEST(Utf8, EachIllFormedFormGivesTheExpectedReplacements) {
  const Case cases[] = {
      {"surrogate ED A0 80", "\xED\xA0\x80", 3},
      {"overlong C0 AF", "\xC0\xAF", 2},
      {"overlong E0 80 AF", "\xE0\x80\xAF", 3},
      {"overlong F0 80 80 AF", "\xF0\x80\x80\xAF", 4},
      {"above U+10FFFF F4 90 80 80", "\xF4\x90\x80\x80", 4},
      {"F5 lead", "\xF5\x80", 2},
      {"FF", "\xFF", 1},
      {"lone continuation", "\x80", 1},
      {"truncated 3-byte at end", "x\xE2\x82", 1},
      {"truncated 4-byte at end", "\xF0\x9F\x98", 1},
      {"truncated 4-byte then ASCII", "\xF0\x9F\x98z", 1},
      {"truncated 2-byte then lead", "\xC3\xC3\xA9", 1},
      {"E0 then bad second", "\xE0\x9F\x80", 3},
      {"ED then bad second", "\xED\xBF\x80", 3},
  };
  for (const Case& c : cases) {
    std::size_t n = 0;
    const std::string out = repaired(c.in, &n);
    EXPECT_EQ(n, c.replacements) << c.name;
    EXPECT_EQ(first_invalid_utf8(out), out.size()) << c.name;
    EXPECT_LT(first_invalid_utf8(c.in), c.in.size()) << c.name;
  }
}

TEST(Utf8, InvalidBytePositionIsFoundPastLongAsciiRuns) {
  std::string text(1000, 'a');
  text += "\xC3";
  text += std::string(17, 'b');
  EXPECT_EQ(first_invalid_utf8(text), 1000u);
  EXPECT_EQ(repaired(text), std::string(1000, 'a') + kFffd + std::string(17, 'b'));
}

// ztok's per-file warning counts the bytes that became U+FFFD, not the replacements.
TEST(Utf8, InvalidBytesAreCountedPerMaximalSubpart) {
  EXPECT_EQ(invalid_utf8_bytes("plain \xC3\xA9 text"), 0u);
  EXPECT_EQ(invalid_utf8_bytes("\xFF\xE2\x82" "a\xF0\x9F\x98"), 6u);  // FF | E2 82 | a | F0 9F 98
  EXPECT_EQ(invalid_utf8_bytes(std::string(1000, '\x80')), 1000u);
}

}  // namespace
}  // namespace zt::tok
