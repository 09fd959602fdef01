// Reads of verified chunks (verified_chunks.hpp): the first read of a chunk checks its Fletcher-32
// (ours, equal to HDF5's), so a damaged chunk is an error on first touch and stays one; the second
// locates it, and later reads return the same ids without HDF5, for uint16 and uint32 shards.
#include <gtest/gtest.h>

#include <random>

#include "core/error.hpp"
#include "data/verified_chunks.hpp"
#include "shard_test_util.hpp"

namespace zt::data {
namespace {

using namespace testing;

std::vector<std::uint32_t> chunk_ramp(std::size_t n, std::uint32_t modulo) {
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint32_t>((i * 7919 + 13) % modulo);
  return v;
}

// HDF5 1.10's H5_checksum_fletcher32 (H5checksum.c), word by word, as the reference.
std::uint32_t reference_fletcher32(const std::uint8_t* data, std::size_t len) {
  std::uint32_t sum1 = 0, sum2 = 0;
  for (std::size_t words = len / 2; words > 0;) {
    std::size_t n = std::min<std::size_t>(words, 360);
    words -= n;
    for (; n > 0; --n, data += 2) {
      sum1 += static_cast<std::uint32_t>(data[0] << 8 | data[1]);
      sum2 += sum1;
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  if (len % 2) {
    sum1 += static_cast<std::uint32_t>(*data << 8);
    sum2 += sum1;
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  sum1 = (sum1 & 0xffff) + (sum1 >> 16);
  sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  return sum2 << 16 | sum1;
}

std::string le16(const std::vector<std::uint32_t>& tokens, std::size_t first, std::size_t n) {
  std::string bytes;
  for (std::size_t i = first; i < first + n; ++i)
    bytes += {static_cast<char>(tokens[i] & 0xff), static_cast<char>(tokens[i] >> 8)};
  return bytes;
}

TEST(ShardChunks, Fletcher32EqualsHdf5sBitForBit) {
  std::mt19937_64 rng(3);
  std::vector<std::uint8_t> data(70000);
  for (auto& b : data) b = static_cast<std::uint8_t>(rng());
  for (std::size_t len : {0, 1, 2, 3, 718, 719, 720, 721, 722, 32768, 32769, 65536, 70000}) {
    EXPECT_EQ(hdf5_fletcher32(std::span(data).first(len)), reference_fletcher32(data.data(), len)) << len;
  }
  for (int i = 0; i < 200; ++i) {
    const std::size_t len = rng() % data.size();
    ASSERT_EQ(hdf5_fletcher32(std::span(data).first(len)), reference_fletcher32(data.data(), len)) << len;
  }
  const std::vector<std::uint8_t> ones(32768, 0xff);  // the largest sums: where overflow would show
  EXPECT_EQ(hdf5_fletcher32(ones), reference_fletcher32(ones.data(), ones.size()));

  // The sum a real shard stores after a chunk's 32 KiB (little-endian) is this one.
  TempDir dir("verified");
  const std::uint64_t k = kShardChunkTokens;
  const auto tokens = chunk_ramp(2 * k, 50257);
  write_shard(dir.path / "s.h5", tokens, {0});
  const std::string file = slurp(dir.path / "s.h5");
  const std::size_t at = file.find(le16(tokens, k, k));  // chunk 1, whole
  ASSERT_NE(at, std::string::npos);
  const auto* stored = reinterpret_cast<const std::uint8_t*>(file.data() + at);
  const std::uint32_t sum = stored[2 * k] | stored[2 * k + 1] << 8 | stored[2 * k + 2] << 16 |
                            static_cast<std::uint32_t>(stored[2 * k + 3]) << 24;
  EXPECT_EQ(hdf5_fletcher32(std::span(stored, 2 * k)), sum);
}

bool equal_at(const std::vector<std::int32_t>& got, const std::vector<std::uint32_t>& tokens, std::size_t start) {
  return std::equal(got.begin(), got.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start),
                    [](std::int32_t a, std::uint32_t b) { return static_cast<std::uint32_t>(a) == b; });
}

TEST(ShardChunks, AFlippedByteInsideAChunkIsCaughtOnFirstRead) {
  TempDir dir("verified");
  const fs::path p = dir.path / "s.h5";
  const std::uint64_t k = kShardChunkTokens;
  const auto tokens = chunk_ramp(3 * k, 50257);
  write_shard(p, tokens, {0});
  std::string bytes = slurp(p);
  const std::string needle = le16(tokens, k, 8);  // chunk 1's first ids occur once in the file
  const std::size_t at = bytes.find(needle);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(needle, at + 1), std::string::npos);
  bytes[at + 1000] ^= 0x01;  // token k + 500: still below vocab_size, so only the checksum can tell
  put(p, bytes);

  const ShardReader r = ShardReader::open(p);
  std::vector<std::int32_t> w(1025);
  EXPECT_FALSE(r.read_verified(0, std::span(w))) << "nothing is verified before a first read";
  r.read(0, std::span(w));  // chunk 0's first read: its checksum checked
  EXPECT_TRUE(equal_at(w, tokens, 0));
  EXPECT_FALSE(r.read_verified(100, std::span(w))) << "located only on its second read";
  r.read(50, std::span(w));  // the second: located
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
  // A window from chunk 0 into chunk 1: the error names chunk 1's range (the one that fails alone),
  // the inputs whose tokens it holds and the fix.
  try {
    r.read(k - 10, std::span(w));
    FAIL() << "a window into a damaged chunk was read without error";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(cat("tokens [", k, ", ", 2 * k, ") are unreadable")), std::string::npos) << what;
    EXPECT_NE(what.find("re-run ztok for its input (a.txt, b/c.txt)"), std::string::npos) << what;
  }
  r.read(2 * k + 7, std::span(w));
  EXPECT_TRUE(equal_at(w, tokens, 2 * k + 7));
  r.read(2 * k + 7, std::span(w));
  ASSERT_TRUE(r.read_verified(2 * k + 7, std::span(w)));
  EXPECT_TRUE(equal_at(w, tokens, 2 * k + 7));
}

TEST(ShardChunks, VerifiedReadsEqualHdf5ReadsForEveryRangeShape) {
  TempDir dir("verified");
  for (const TokenizerInfo& info : {gpt2_info(), TokenizerInfo{"custom", "h", 100000, 99999}}) {
    const fs::path p = dir.path / (info.name + ".h5");
    const std::uint64_t k = kShardChunkTokens;
    const auto tokens = chunk_ramp(2 * k + 1234, static_cast<std::uint32_t>(info.vocab_size));  // a short last chunk
    write_shard(p, tokens, {0}, info);
    const ShardReader r = ShardReader::open(p);
    std::vector<std::int32_t> all(tokens.size());
    r.read(0, std::span(all));  // every chunk verified (from its stored bytes)
    EXPECT_TRUE(equal_at(all, tokens, 0)) << info.name;
    r.read(0, std::span(all));  // and located
    EXPECT_TRUE(equal_at(all, tokens, 0)) << info.name;
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
