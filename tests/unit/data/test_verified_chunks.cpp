// Reads of verified chunks (verified_chunks.hpp): the first read of a chunk goes through HDF5 and its
// Fletcher-32, so a damaged chunk is an error on first touch and stays one; later reads of verified
// chunks return the same ids without HDF5, for uint16 and uint32 shards.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "shard_test_util.hpp"

namespace zt::data {
namespace {

using namespace testing;

std::vector<std::uint32_t> ramp(std::size_t n, std::uint32_t modulo) {
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint32_t>((i * 7919 + 13) % modulo);
  return v;
}

bool equal_at(const std::vector<std::int32_t>& got, const std::vector<std::uint32_t>& tokens, std::size_t start) {
  return std::equal(got.begin(), got.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start),
                    [](std::int32_t a, std::uint32_t b) { return static_cast<std::uint32_t>(a) == b; });
}

TEST(VerifiedChunks, AFlippedByteInsideAChunkIsCaughtOnFirstRead) {
  TempDir dir("verified");
  const fs::path p = dir.path / "s.h5";
  const std::uint64_t k = kShardChunkTokens;
  const auto tokens = ramp(3 * k, 50257);
  write_shard(p, tokens, {0});
  std::string bytes = slurp(p);
  // Chunk 1's stored ids: 8 of them (little-endian uint16) occur once in the file.
  std::string needle;
  for (std::uint64_t i = k; i < k + 8; ++i) needle += {static_cast<char>(tokens[i] & 0xff), static_cast<char>(tokens[i] >> 8)};
  const std::size_t at = bytes.find(needle);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(needle, at + 1), std::string::npos);
  bytes[at + 1000] ^= 0x01;  // token k + 500: still below vocab_size, so only the checksum can tell
  put(p, bytes);

  const ShardReader r = ShardReader::open(p);
  std::vector<std::int32_t> w(1025);
  EXPECT_FALSE(r.read_verified(0, std::span(w))) << "nothing is verified before a first read";
  r.read(0, std::span(w));  // chunk 0 through HDF5: verified
  ASSERT_TRUE(r.read_verified(100, std::span(w)));
  EXPECT_TRUE(equal_at(w, tokens, 100));
  for (int attempt = 0; attempt < 2; ++attempt) {  // a failed chunk is never marked verified
    EXPECT_FALSE(r.read_verified(k + 100, std::span(w)));
    try {
      r.read(k + 100, std::span(w));
      FAIL() << "a damaged chunk was read without error";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("s.h5"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("Fletcher32"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(r.read(k - 10, std::span(w)), DataError);  // a window from chunk 0 into chunk 1
  r.read(2 * k + 7, std::span(w));
  ASSERT_TRUE(r.read_verified(2 * k + 7, std::span(w)));
  EXPECT_TRUE(equal_at(w, tokens, 2 * k + 7));
}

TEST(VerifiedChunks, VerifiedReadsEqualHdf5ReadsForEveryRangeShape) {
  TempDir dir("verified");
  for (const TokenizerInfo& info : {gpt2_info(), TokenizerInfo{"custom", "h", 100000, 99999}}) {
    const fs::path p = dir.path / (info.name + ".h5");
    const std::uint64_t k = kShardChunkTokens;
    const auto tokens = ramp(2 * k + 1234, static_cast<std::uint32_t>(info.vocab_size));  // a short last chunk
    write_shard(p, tokens, {0}, info);
    const ShardReader r = ShardReader::open(p);
    std::vector<std::int32_t> all(tokens.size());
    r.read(0, std::span(all));  // every chunk verified
    for (const auto& [start, n] : std::vector<std::pair<std::uint64_t, std::size_t>>{
             {0, 1}, {k - 1, 2}, {k - 600, 1025}, {5, 2 * k}, {2 * k, 1234}, {tokens.size() - 1, 1}, {0, tokens.size()}}) {
      std::vector<std::int32_t> got(n);
      ASSERT_TRUE(r.read_verified(start, std::span(got))) << info.name << " " << start;
      EXPECT_TRUE(equal_at(got, tokens, start)) << info.name << " [" << start << ", +" << n << ")";
    }
    std::vector<std::int32_t> past(2);
    EXPECT_THROW(r.read_verified(tokens.size() - 1, std::span(past)), DataError);
  }
}

}  // namespace
}  // namespace zt::data
