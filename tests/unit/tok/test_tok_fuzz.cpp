// Fuzz: random and truncated byte strings through UTF-8 repair, pre-tokenizing and encoding, for every
// pre-tokenizer kind (gpt2, cl100k, o200k). Nothing may crash; pieces tile the text; decode(encode(x))
// is x for valid UTF-8 and its repair otherwise.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tok/utf8.hpp"
#include "vocab_fixture.hpp"

namespace zt::tok {
namespace {

// Fragments chosen to hit every branch of the scanner: each kind of space, contractions, digits,
// marks, emoji with ZWJ, CJK, Arabic, new Unicode 16 letters, U+FEFF, and ill-formed bytes.
const std::vector<std::string> kFragments = {
    " ", "  ", "\t", "\n", "\r\n", "\v", "\f", "\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x80",
    "\xE2\x80\xA8", "\xE2\x80\xAF", "\xE3\x80\x80", "\xEF\xBB\xBF", "'", "'s", "'S", "'re", "'ll", "'d", "'ve",
    "'m", "'t", "a", "The", "hello", "x", "0", "42", "\xC2\xBD", "!", "?!", "...", "-", "\"", "(", "\xCC\x81",
    "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB", "\xE4\xB8\xAD\xE6\x96\x87", "\xD8\xA8\xD9\x90",
    "\xE1\xB2\x89", "\xF0\x90\xB5\x80", "<|endoftext|>", "\xFF", "\xC3", "\xE2\x82", "\xED\xA0\x80",
    "\xF4\x90\x80\x80", "\x80", "\x1C", std::string(1, '\0'),
    // cl100k / o200k: case runs, long s, slashes, lone CR, title case, modifier letters, marks on caps
    "A", "HELLO", "World", "'\xC5\xBF", "/", "\r", "\xC7\x85", "\xCA\xB0", "A\xCC\x81" "B", "1234567"};

std::string random_text(std::mt19937& rng) {
  std::string s;
  const int kind = static_cast<int>(rng() % 3);
  const std::size_t n = rng() % 60;
  for (std::size_t i = 0; i < n; ++i) {
    if (kind == 0) {
      s += static_cast<char>(rng() & 0xFF);  // raw random bytes
    } else {
      s += kFragments[rng() % kFragments.size()];  // fragment soup
    }
  }
  if (kind == 2 && !s.empty()) s.resize(rng() % s.size());            // truncated anywhere
  return s;
}

// Pieces of every kind tile random text and adversarial long runs.
TEST(TokFuzz, EveryPreTokenizerKindTilesAnyText) {
  const CharClassTable classes;
  std::mt19937 rng(7);
  std::vector<std::string> texts;
  for (int i = 0; i < 3000; ++i) {
    std::string repaired;
    append_replacing_invalid(random_text(rng), repaired);
    texts.push_back(repaired);
  }
  for (const char* run : {"a", "A", "1", " ", "\n", "\r\n", " \n", "!", "/", "\xCC\x81", "'s", "\xE4\xB8\xAD", "aB"}) {
    std::string long_run;
    while (long_run.size() < 200000) long_run += run;
    texts.push_back(long_run);
    texts.push_back(" " + long_run + "x");
  }
  for (const PatternKind kind : {PatternKind::kGpt2, PatternKind::kCl100k, PatternKind::kO200k}) {
    for (const unsigned digits : {1u, 3u}) {
      const PreTokenizer pre(classes, {kind, digits});
      for (const std::string& text : texts) {
        std::size_t covered = 0;
        pre.for_each_piece(text, [&](std::string_view piece) {
          ASSERT_FALSE(piece.empty());
          ASSERT_EQ(piece.data(), text.data() + covered);
          covered += piece.size();
        });
        ASSERT_EQ(covered, text.size()) << pattern_name({kind, digits});
      }
    }
  }
}

void fuzz_round_trip(const Tokenizer* tokenizer) {
  std::mt19937 rng(20240601);
  Encoder enc(*tokenizer, 64);
  std::vector<std::uint32_t> ids;
  for (int trial = 0; trial < 4000; ++trial) {
    const std::string text = random_text(rng);
    std::string repaired;
    const std::size_t expected_replacements = append_replacing_invalid(text, repaired);
    ASSERT_EQ(first_invalid_utf8(repaired), repaired.size());

    std::string tiled;
    tokenizer->pretokenizer().for_each_piece(repaired, [&](std::string_view piece) {
      ASSERT_FALSE(piece.empty());
      tiled += piece;
    });
    ASSERT_EQ(tiled, repaired) << "trial " << trial;

    ids.clear();
    ASSERT_EQ(enc.encode(text, ids), expected_replacements) << "trial " << trial;
    for (std::uint32_t id : ids) ASSERT_EQ(tokenizer->vocab().find(tokenizer->vocab().token_bytes(id)), id);  // never special
    ASSERT_EQ(tokenizer->decode(ids), repaired) << "trial " << trial;
    if (expected_replacements == 0) {
      ASSERT_EQ(repaired, text);
    }
  }
}

TEST(TokFuzz, RandomBytesNeverCrashAndRoundTrip) {
  ZT_REQUIRE_VOCAB();
  fuzz_round_trip(tokenizer);
}

TEST(TokFuzz, RankFileEncodingsRoundTrip) {
  for (const char* name : {"cl100k_base", "o200k_base"}) {
    const Tokenizer* tokenizer = testing::rank_file_tokenizer(name);
    if (tokenizer == nullptr) GTEST_SKIP() << name << " unavailable: run tools/fetch-vocab.sh --encoding " << name;
    SCOPED_TRACE(name);
    fuzz_round_trip(tokenizer);
  }
}

}  // namespace
}  // namespace zt::tok
