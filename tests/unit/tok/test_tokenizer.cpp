// The real GPT-2 vocabulary: its hash, a few ids checked against tiktoken, decoding, the cache.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "vocab_fixture.hpp"

namespace zt::tok {
namespace {

using Ids = std::vector<std::uint32_t>;

Ids encode(const Tokenizer& t, std::string_view text) {
  Encoder enc(t);
  Ids ids;
  enc.encode(text, ids);
  return ids;
}

TEST(Tokenizer, VocabularyHasGpt2ShapeAndHash) {
  ZT_REQUIRE_VOCAB();
  const Vocab& v = tokenizer->vocab();
  EXPECT_EQ(v.size(), 50257u);
  EXPECT_EQ(v.n_merges(), 50000u);
  EXPECT_EQ(v.eot(), 50256u);
  // sha256 of encoder.json's bytes followed by vocab.bpe's (sums in tools/fetch-vocab.sh).
  EXPECT_EQ(v.hash(), "00f404d36600411e497efb3df08d3b4e094f0820e2595afcb7cbd0c4353d4fcb");
}

// Expected ids from tiktoken 1.0.22 (`gpt2`, encode_ordinary).
TEST(Tokenizer, EncodesLikeTiktoken) {
  ZT_REQUIRE_VOCAB();
  EXPECT_EQ(encode(*tokenizer, "hello world"), (Ids{31373, 995}));
  EXPECT_EQ(encode(*tokenizer, "<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(encode(*tokenizer, ""), Ids{});
}

TEST(Tokenizer, EndOfTextIsNeverProducedFromText) {
  ZT_REQUIRE_VOCAB();
  for (const char* text : {"<|endoftext|>", " <|endoftext|>x", "<|endoftext|><|endoftext|>"})
    for (std::uint32_t id : encode(*tokenizer, text)) EXPECT_NE(id, tokenizer->vocab().eot()) << text;
}

TEST(Tokenizer, DecodeInvertsEncodeAndNamesBadIds) {
  ZT_REQUIRE_VOCAB();
  const std::string text = "Caf\xC3\xA9 \xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB it's  1,234\r\n\t\xE4\xB8\xAD";
  EXPECT_EQ(tokenizer->decode(encode(*tokenizer, text)), text);
  EXPECT_EQ(tokenizer->decode(Ids{50256}), "<|endoftext|>");
  EXPECT_THROW(tokenizer->decode(Ids{50257}), Error);
}

TEST(Tokenizer, ReplacesInvalidUtf8AndCountsIt) {
  ZT_REQUIRE_VOCAB();
  Encoder enc(*tokenizer);
  Ids ids;
  EXPECT_EQ(enc.encode("a\xFF" "b\xE2\x82", ids), 2u);
  EXPECT_EQ(tokenizer->decode(ids), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
}

// A tiny cache that is emptied many times must give the same ids as a large one.
TEST(Tokenizer, CacheSizeDoesNotChangeTheIds) {
  ZT_REQUIRE_VOCAB();
  std::string text;
  for (int i = 0; i < 2000; ++i) text += cat(" word", i % 97, " the", (i * 7919) % 1013, " and");
  Encoder small(*tokenizer, 4), large(*tokenizer);
  Ids a, b;
  small.encode(text, a);
  small.encode(text, a);
  large.encode(text, b);
  large.encode(text, b);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace zt::tok
