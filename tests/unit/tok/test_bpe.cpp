// BPE merging on a hand-made vocabulary (tiktoken's rank-of-concatenation rule) and the two merge
// strategies against each other on the real one.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tok/bpe.hpp"
#include "tok/unicode.hpp"
#include "vocab_fixture.hpp"

namespace zt::tok {
namespace {

using Ids = std::vector<std::uint32_t>;

std::string stand_in(std::string_view bytes) {  // GPT-2's printable form of a byte string
  std::string out;
  for (unsigned char b : bytes) append_utf8(byte_to_unicode()[b], out);
  return out;
}

// A vocabulary of the 256 bytes (in tiktoken's rank order) plus the given merges and <|endoftext|>.
Vocab tiny_vocab(const std::vector<std::pair<std::string, std::string>>& merges) {
  std::vector<std::string> tokens;
  for (int pass = 0; pass < 2; ++pass)  // printable Latin-1 bytes first, then the rest
    for (unsigned b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      if (printable == (pass == 0)) tokens.push_back(std::string(1, static_cast<char>(b)));
    }
  std::string bpe = "#version: 0.2\n";
  for (const auto& [a, b] : merges) {
    tokens.push_back(a + b);
    bpe += stand_in(a) + " " + stand_in(b) + "\n";
  }
  std::string json = "{";
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    std::string key = stand_in(tokens[id]);
    if (key == "\"" || key == "\\") key = "\\" + key;
    json += cat("\"", key, "\": ", id, ", ");
  }
  json += cat("\"<|endoftext|>\": ", tokens.size(), "}");
  return Vocab::parse(json, bpe, "tiny");
}

Ids merge(const Vocab& v, std::string_view piece, bool heap) {
  BpeMerger m(v);
  Ids out;
  heap ? m.merge_heap(piece, out) : m.merge_scan(piece, out);
  return out;
}

TEST(Bpe, MergesLowestRankFirstAndLeftmostOnTies) {
  const Vocab v = tiny_vocab({{"a", "b"}, {"b", "c"}, {"ab", "c"}});  // ab=256 bc=257 abc=258
  for (bool heap : {false, true}) {
    EXPECT_EQ(merge(v, "abc", heap), (Ids{258})) << heap;
    EXPECT_EQ(merge(v, "bcab", heap), (Ids{257, 256})) << heap;
    EXPECT_EQ(merge(v, "abab", heap), (Ids{256, 256})) << heap;
    EXPECT_EQ(merge(v, "xyz", heap), (Ids{v.byte_token('x'), v.byte_token('y'), v.byte_token('z')})) << heap;
  }
  EXPECT_EQ(v.size(), 260u);
  EXPECT_EQ(v.eot(), 259u);
}

// tiktoken looks up the rank of the concatenated bytes, not the merge list's pair: "abc" exists as
// a+bc, so ab+c also merges into it although "ab c" is no merge.
TEST(Bpe, RankIsLookedUpByConcatenatedBytes) {
  const Vocab v = tiny_vocab({{"a", "b"}, {"b", "c"}, {"a", "bc"}});  // ab=256 bc=257 abc=258
  EXPECT_EQ(v.merged(256, v.byte_token('c')), 258u);
  for (bool heap : {false, true}) EXPECT_EQ(merge(v, "abcd", heap), (Ids{258, v.byte_token('d')})) << heap;
}

TEST(Bpe, InconsistentVocabularyIsRefusedNamingTheLine) {
  try {
    Vocab::parse("{\"a\": 0, \"<|endoftext|>\": 1}", "#version: 0.2\n", "bad");
    FAIL() << "accepted a vocabulary without its byte tokens";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad/encoder.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Vocab::parse("[1, 2]", "", "bad"), InputError);
  EXPECT_THROW(Vocab::parse("{\"a\": ", "", "bad"), InputError);
}

TEST(Bpe, ScanAndHeapAgreeOnLongRandomPiecesOfTheRealVocabulary) {
  ZT_REQUIRE_VOCAB();
  std::mt19937 rng(7);
  const std::string alphabet = "etaoinshrdlucmfwypvbgkqjxz";
  for (int trial = 0; trial < 300; ++trial) {
    std::string piece(1 + rng() % 400, 'a');
    for (char& c : piece) c = alphabet[std::min<std::size_t>(rng() % 40, alphabet.size() - 1)];
    if (trial % 3 == 0) piece[rng() % piece.size()] = static_cast<char>(0x80 + rng() % 64);
    EXPECT_EQ(merge(tokenizer->vocab(), piece, false), merge(tokenizer->vocab(), piece, true)) << piece;
  }
}

}  // namespace
}  // namespace zt::tok
