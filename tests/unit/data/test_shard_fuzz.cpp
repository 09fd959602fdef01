// Fuzz the shard reader with truncated, overwritten and random files: every outcome is a clean
// zt::Error (or a successful read); no crash, no hang, and HDF5 prints nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "core/error.hpp"
#include "shard_test_util.hpp"

namespace zt::data {
namespace {

using namespace testing;

// Opens and reads everything; returns "ok" or the error text.
std::string try_read(const fs::path& p) {
  try {
    const ShardReader r = ShardReader::open(p, {std::string(64, 'a'), 50257, 50256});
    std::vector<std::uint32_t> all(r.info().n_tokens);
    r.read(0, std::span(all));
    r.doc_offsets();
    return "ok";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(p.filename().string()), std::string::npos) << what;
    return what;
  }
}

TEST(ShardFuzz, DamagedFilesGiveCleanErrors) {
  TempDir dir("shard_fuzz");
  std::vector<std::uint32_t> tokens(3 * kShardChunkTokens / 2);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint32_t>(i % 50000);
  write_shard(dir.path / "good.h5", tokens, {0, 99, 4000});
  const std::string good = slurp(dir.path / "good.h5");
  ASSERT_EQ(try_read(dir.path / "good.h5"), "ok");

  // ZT_FUZZ_SEED picks another sequence of damage, for soak runs by hand.
  const char* seed = std::getenv("ZT_FUZZ_SEED");
  std::mt19937_64 rng(seed ? std::strtoull(seed, nullptr, 10) : 12345);
  int errors = 0, cases = 0;
  const fs::path p = dir.path / "bad.h5";
  for (int i = 0; i < 120; ++i, ++cases) {  // truncated at random lengths (and the edges)
    const std::size_t len = i == 0 ? 0 : i == 1 ? good.size() - 1 : rng() % good.size();
    put(p, good.substr(0, len));
    errors += try_read(p) != "ok";
  }
  EXPECT_EQ(errors, cases) << "every truncated shard must be refused";
  for (int i = 0; i < 200; ++i, ++cases) {  // a few bytes overwritten anywhere
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 8);
    const bool in_header = i % 2 == 0;  // half of them in the first 4 KiB, where the metadata lives
    for (int k = 0; k < flips; ++k)
      bad[in_header ? rng() % 4096 : rng() % bad.size()] = static_cast<char>(rng());
    put(p, bad);
    try_read(p);
  }
  for (std::size_t at = 0; at < 6000; at += 5, ++cases) {  // the metadata region, byte by byte
    std::string bad = good;
    bad[at] = static_cast<char>(~bad[at]);
    put(p, bad);
    try_read(p);
  }
  for (int i = 0; i < 60; ++i, ++cases) {  // random bytes, sometimes behind a valid HDF5 signature
    std::string bad(rng() % 20000, '\0');
    for (char& c : bad) c = static_cast<char>(rng());
    if (i % 2 == 0) bad = good.substr(0, 8 + rng() % 512) + bad;
    put(p, bad);
    EXPECT_NE(try_read(p), "ok");
  }
  EXPECT_GE(cases, 1580);
}

}  // namespace
}  // namespace zt::data
