// BPE merging on a hand-made vocabulary (tiktoken's rank-of-concatenation rule) and the two merge
// strategies against each other on the real one.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
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

// The lean path on pieces of 1 to 400 bytes: parts across its 64-byte blocks, the first and last block.
TEST(Bpe, LeanAgreesWithScanOnRandomPiecesAcrossItsBlocks) {
  const Vocab v = tiny_vocab({{"a", "b"}, {"b", "c"}, {"ab", "c"}, {"c", "c"}, {"cc", "cc"}, {"abc", "abc"}, {"b", "a"}});
  std::mt19937 rng(11);
  BpeMerger m(v);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string piece(1 + rng() % 400, 'a');
    for (char& c : piece) c = "abcx"[rng() % 4];
    Ids scan, lean;
    m.merge_scan(piece, scan);
    m.merge_lean(piece, lean);
    ASSERT_EQ(scan, lean) << piece;
  }
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
    Ids lean;
    BpeMerger(tokenizer->vocab()).merge_lean(piece, lean);
    EXPECT_EQ(merge(tokenizer->vocab(), piece, false), lean) << piece;
  }
}

// The merge rule written the obvious way: the parts in an ordered map, every live pair in an ordered
// set keyed (rank, start), each pair erased and inserted as the parts change. Slow, and plainly right.
Ids reference_merge(const Vocab& v, std::string_view piece) {
  std::map<std::size_t, std::uint32_t> parts;  // start byte -> token
  std::set<std::pair<std::uint32_t, std::size_t>> pairs;
  for (std::size_t i = 0; i < piece.size(); ++i) parts[i] = v.byte_token(static_cast<unsigned char>(piece[i]));
  auto pair_at = [&](std::map<std::size_t, std::uint32_t>::iterator it) {
    const auto next = std::next(it);
    const std::uint32_t rank = next == parts.end() ? Vocab::kNone : v.merged(it->second, next->second);
    return std::make_pair(rank, it->first);
  };
  for (auto it = parts.begin(); it != parts.end(); ++it) pairs.insert(pair_at(it));
  while (!pairs.empty() && pairs.begin()->first != Vocab::kNone) {
    const auto [rank, start] = *pairs.begin();
    auto it = parts.find(start);
    const auto right = std::next(it);
    if (it != parts.begin()) pairs.erase(pair_at(std::prev(it)));
    pairs.erase(pair_at(it));
    pairs.erase(pair_at(right));
    it->second = rank;
    parts.erase(right);
    pairs.insert(pair_at(it));
    if (it != parts.begin()) pairs.insert(pair_at(std::prev(it)));
  }
  Ids out;
  for (const auto& part : parts) out.push_back(part.second);
  return out;
}

// Pieces of 0.4-1 MB of every kind the pre-tokenizer can make arbitrarily long (letters, digits,
// punctuation, white space, non-ASCII letters, U+FFFD from binary input, one repeated letter)
// against the obvious implementation. The heap path compacts its entries on pieces this long.
TEST(Bpe, HeapMatchesTheObviousMergeOnHugePiecesOfEveryClass) {
  ZT_REQUIRE_VOCAB();
  const Vocab& v = tokenizer->vocab();
  std::mt19937 rng(23);
  auto random_of = [&](const std::string& alphabet, std::size_t n) {
    std::string s(n, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    return s;
  };
  std::string cjk, replacement;
  while (cjk.size() < 400'000) append_utf8(0x4E00 + rng() % 20000, cjk);
  while (replacement.size() < 400'000) append_utf8(rng() % 8 ? 0xFFFD : '?', replacement);
  const std::vector<std::pair<const char*, std::string>> pieces = {
      {"letters", random_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 1'000'000)},
      {"english-like", random_of("etaoinshrdlucmfwypvbgkqjxzeeettaaoo", 400'000)},
      {"digits", random_of("0123456789", 400'000)},
      {"punctuation", random_of("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~", 400'000)},
      {"white space", random_of(" \t\n\r", 400'000)},
      {"spaces", std::string(400'000, ' ')},
      {"one letter", std::string(400'001, 'a')},
      {"cjk", cjk},
      {"replacement characters", replacement},
  };
  BpeMerger merger(v);
  for (const auto& [name, piece] : pieces) {
    const Ids want = reference_merge(v, piece);
    for (const bool lean : {false, true}) {  // the lean path is what pieces over a chunk take
      Ids got;
      lean ? merger.merge_lean(piece, got) : merger.merge_heap(piece, got);
      ASSERT_EQ(got.size(), want.size()) << name << (lean ? " (lean)" : " (heap)");
      EXPECT_TRUE(got == want) << name << (lean ? " (lean)" : " (heap)") << ": first difference at token "
                               << std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin();
    }
  }
}

}  // namespace
}  // namespace zt::tok
