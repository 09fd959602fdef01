// The order contract: unshuffled windows follow the stream and wrap; shuffled epochs are seeded
// permutations; the global batch sequence does not depend on world size or micro-batch size.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "data/window_order.hpp"

namespace zt::data {
namespace {

TEST(WindowOrder, UnshuffledWindowsStartSeqLenApartAndWrap) {
  // 23 tokens, T=5: windows of 6 tokens start at 0, 5, 10, 15 (15+6=21 <= 23); the next would need
  // tokens 20..25, so the stream wraps to 0.
  WindowOrder order(23, 5, /*shuffle=*/false, 1);
  EXPECT_EQ(order.windows_per_epoch(), 4u);
  std::vector<std::uint64_t> starts;
  for (std::uint64_t g = 0; g < 6; ++g) starts.push_back(order.window_start(g));
  EXPECT_EQ(starts, (std::vector<std::uint64_t>{0, 5, 10, 15, 0, 5}));
}

TEST(WindowOrder, ExactFitUsesTheLastToken) {
  WindowOrder order(21, 5, false, 1);  // windows at 0, 5, 10, 15: the last ends at token 20
  EXPECT_EQ(order.windows_per_epoch(), 4u);
}

TEST(WindowOrder, TooShortStreamIsADataError) {
  EXPECT_THROW(WindowOrder(5, 5, false, 1), DataError);
  EXPECT_NO_THROW(WindowOrder(6, 5, false, 1));
}

// The count a resume compares with a checkpoint's, without building an order (or throwing for a short stream).
TEST(WindowOrder, WindowsInIsTheOrdersCountAndZeroForAShortStream) {
  for (const std::uint64_t n : {17ull, 100ull, 1000ull})
    for (const bool packed : {false, true})
      EXPECT_EQ(WindowOrder::windows_in(n, 16, packed), WindowOrder(n, 16, false, 1, packed).windows_per_epoch()) << n;
  EXPECT_EQ(WindowOrder::windows_in(16, 16), 0u);
  EXPECT_EQ(WindowOrder::windows_in(0, 16, true), 0u);
}

TEST(Permute, IsABijectionForOddAndTinySizes) {
  for (std::uint64_t n : {1ull, 2ull, 3ull, 7ull, 64ull, 1000ull, 4099ull}) {
    std::set<std::uint64_t> seen;
    for (std::uint64_t i = 0; i < n; ++i) seen.insert(permute(i, n, 42));
    EXPECT_EQ(seen.size(), n);
    EXPECT_LT(*seen.rbegin(), n);
  }
}

TEST(Permute, DependsOnTheKeyAndShuffles) {
  const std::uint64_t n = 1000;
  int same = 0, fixed = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    same += permute(i, n, 1) == permute(i, n, 2);
    fixed += permute(i, n, 1) == i;
  }
  EXPECT_LT(same, 20);
  EXPECT_LT(fixed, 20);
}

TEST(WindowOrder, ShuffledEpochsArePermutationsThatDifferByEpochAndSeed) {
  WindowOrder a(10001, 10, true, 7), b(10001, 10, true, 8);
  const std::uint64_t w = a.windows_per_epoch();
  std::set<std::uint64_t> epoch0, epoch1;
  int differs_epoch = 0, differs_seed = 0;
  for (std::uint64_t k = 0; k < w; ++k) {
    epoch0.insert(a.window_start(k));
    epoch1.insert(a.window_start(w + k));
    differs_epoch += a.window_start(k) != a.window_start(w + k);
    differs_seed += a.window_start(k) != b.window_start(k);
  }
  EXPECT_EQ(epoch0.size(), w);
  EXPECT_EQ(epoch0, epoch1);
  EXPECT_GT(differs_epoch, static_cast<int>(w * 9 / 10));
  EXPECT_GT(differs_seed, static_cast<int>(w * 9 / 10));
}

// Every (world size, micro-batch) split of the same global batch assembles the same global windows.
TEST(BatchSlice, GlobalBatchesDoNotDependOnWorldOrMicroBatch) {
  const std::int64_t global = 12;
  auto assemble = [&](std::int64_t dp, std::int64_t micro, std::uint64_t step) {
    std::vector<std::uint64_t> windows;
    for (std::int64_t r = 0; r < dp; ++r) {
      BatchSlice s{global, micro, dp, r};
      for (std::int64_t m = 0; m < global / (micro * dp); ++m)
        for (std::int64_t j = 0; j < micro; ++j) windows.push_back(s.window(step, m, j));
    }
    return windows;
  };
  for (std::uint64_t step : {0ull, 1ull, 17ull}) {
    auto one = assemble(1, 12, step);
    EXPECT_EQ(one.front(), step * global);
    EXPECT_EQ(assemble(2, 3, step), one);
    EXPECT_EQ(assemble(4, 1, step), one);
    EXPECT_EQ(assemble(3, 2, step), one);
  }
}

// Packed instruction data (ztok --pack): windows of seq_len + 1 laid end to end, none overlapping, and a
// shuffled epoch is a permutation of them.
TEST(WindowOrder, PackedWindowsLieEndToEnd) {
  WindowOrder plain(34, 16, false, 1), packed(34, 16, false, 1, true);
  EXPECT_EQ(plain.windows_per_epoch(), 2u);
  EXPECT_EQ(plain.window_start(1), 16u);
  EXPECT_EQ(packed.windows_per_epoch(), 2u);
  EXPECT_EQ(packed.window_start(1), 17u);
  EXPECT_EQ(packed.window_start(2), 0u);  // the next epoch
  WindowOrder shuffled(17 * 9, 16, true, 5, true);
  std::vector<std::uint64_t> starts;
  for (std::uint64_t g = 0; g < 9; ++g) starts.push_back(shuffled.window_start(g));
  std::sort(starts.begin(), starts.end());
  for (std::uint64_t g = 0; g < 9; ++g) EXPECT_EQ(starts[g], 17 * g);
}

}  // namespace
}  // namespace zt::data
