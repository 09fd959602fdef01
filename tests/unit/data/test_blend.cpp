// The blend order (data/blend.hpp): shares converge to the weights, the index is deterministic, a jump
// to any cursor equals replaying up to it, one corpus is today's window order, and data.train's
// weighted form parses or is refused with the fix.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "data/blend.hpp"

namespace zt::data {
namespace {

TEST(BlendIndex, SharesConvergeToTheWeights) {
  const std::vector<double> weights{0.5, 0.3, 0.2};
  BlendIndex index(weights);
  for (const std::uint64_t n : {10ull, 1000ull, 100000ull}) {
    const std::vector<std::uint64_t> counts = index.counts_before(n);
    for (std::size_t d = 0; d < weights.size(); ++d)  // the greedy keeps every count within 1 of w_d n
      EXPECT_LE(std::fabs(static_cast<double>(counts[d]) - weights[d] * static_cast<double>(n)), 1.0) << n << " " << d;
  }
}

TEST(BlendIndex, FollowsMegatronsGreedyOnItsFirstSamples) {
  // Megatron's BlendedDataset with weights (0.7, 0.3): errors w (i+1) - count, argmax, ties to the first.
  BlendIndex index({0.7, 0.3});
  std::vector<std::size_t> corpora;
  for (std::uint64_t i = 0; i < 10; ++i) corpora.push_back(index.locate(i).corpus);
  EXPECT_EQ(corpora, (std::vector<std::size_t>{0, 1, 0, 0, 0, 1, 0, 0, 1, 0}));  // i=4: a tie (0.5, 0.5)
  EXPECT_EQ(index.locate(9).index, 6u);  // the seventh window of corpus 0
}

TEST(BlendIndex, IsDeterministicAndAJumpEqualsTheReplay) {
  const std::vector<double> weights{0.1, 0.6, 0.3};
  BlendIndex replay(weights);
  std::vector<BlendIndex::Position> in_order;
  const std::uint64_t n = 3 * BlendIndex::kSnapshotEvery + 17;
  for (std::uint64_t i = 0; i < n; ++i) in_order.push_back(replay.locate(i));
  BlendIndex jumper(weights);
  for (const std::uint64_t i : std::vector<std::uint64_t>{n - 1, 5, BlendIndex::kSnapshotEvery, 2 * BlendIndex::kSnapshotEvery - 1, 0, n - 2}) {
    const BlendIndex::Position p = jumper.locate(i);
    EXPECT_EQ(p.corpus, in_order[i].corpus) << i;
    EXPECT_EQ(p.index, in_order[i].index) << i;
  }
  // Positions count each corpus's windows densely: corpus d's k-th window is index k.
  std::vector<std::uint64_t> next(weights.size(), 0);
  for (const BlendIndex::Position& p : in_order) EXPECT_EQ(p.index, next[p.corpus]++);
}

// Far into a run the counts still hold the weights to one window (the replay's speed is a benchmark:
// tools/bench/loader/bench_blend).
TEST(BlendIndex, CountsFarIntoARunHoldTheWeights) {
  BlendIndex index({0.7, 0.3});
  const std::vector<std::uint64_t> counts = index.counts_before(10000000);
  EXPECT_EQ(counts[0] + counts[1], 10000000u);
  EXPECT_LE(std::llabs(static_cast<long long>(counts[0]) - 7000000LL), 1);
}

TEST(BlendedOrder, OneCorpusIsTheWindowOrder) {
  const WindowOrder single(10007, 16, /*shuffle=*/true, 42);
  const BlendedOrder blend({single}, {1.0});
  for (std::uint64_t g = 0; g < 2000; ++g) {
    EXPECT_EQ(blend.window(g).corpus, 0u);
    EXPECT_EQ(blend.window(g).start, single.window_start(g));
  }
  EXPECT_EQ(corpus_seed(42, 0), 42u);
}

TEST(BlendedOrder, EachCorpusKeepsItsOwnOrderAndASmallOneRepeats) {
  const WindowOrder big(100 * 17 + 1, 17, true, corpus_seed(7, 0)), small(5 * 17 + 1, 17, true, corpus_seed(7, 1));
  const BlendedOrder blend({big, small}, {0.5, 0.5});
  std::vector<std::uint64_t> k(2, 0);
  for (std::uint64_t g = 0; g < 40; ++g) {
    const BlendedOrder::Window w = blend.window(g);
    EXPECT_EQ(w.start, (w.corpus == 0 ? big : small).window_start(k[w.corpus]++));
  }
  EXPECT_EQ(k[1], 20u);  // 4 epochs of the 5-window corpus
  EXPECT_EQ(blend.consumed(40), k);
}

TEST(BlendedOrder, AStartedBlendCountsFromItsStart) {
  const WindowOrder a(1000, 9, false, 1), b(1000, 9, false, 2);
  const BlendedOrder from_zero({a, b}, {0.6, 0.4}), from_100({a, b}, {0.6, 0.4}, 100);
  for (std::uint64_t g = 0; g < 50; ++g) {
    EXPECT_EQ(from_100.window(100 + g).corpus, from_zero.window(g).corpus);
    EXPECT_EQ(from_100.window(100 + g).start, from_zero.window(g).start);
  }
  EXPECT_THROW(from_100.window(99), Error);
}

TEST(ParseBlend, UnweightedIsOneCorpusAsBefore) {
  const auto one = parse_blend("a/train_*.h5,b/train_*.h5", "data.train");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].glob, "a/train_*.h5,b/train_*.h5");
  EXPECT_EQ(one[0].weight, 1.0);
}

TEST(ParseBlend, WeightsAreNormalised) {
  const auto two = parse_blend("7:web/*.h5,3:code/*.h5", "data.train");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].glob, "web/*.h5");
  EXPECT_DOUBLE_EQ(two[0].weight, 0.7);
  EXPECT_DOUBLE_EQ(two[1].weight, 0.3);
  EXPECT_EQ(describe_blend(two), "0.7:web/*.h5,0.3:code/*.h5");
}

TEST(ParseBlend, BadEntriesNameTheValueAndTheFix) {
  auto message = [](const std::string& value) {
    try {
      parse_blend(value, "data.train");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("0:web/*.h5,1:code/*.h5").find("'0:web/*.h5' must be a number > 0"), std::string::npos);
  EXPECT_NE(message("-1:web/*.h5").find("must be a number > 0"), std::string::npos);
  EXPECT_NE(message("0.5:,0.5:code/*.h5").find("has a weight but no glob"), std::string::npos);
  EXPECT_NE(message("0.5:web/*.h5,code/*.h5").find("'code/*.h5' has no weight"), std::string::npos);
  EXPECT_NE(message("0.5:web/*.h5,code/*.h5").find("WEIGHT:GLOB"), std::string::npos);
}

}  // namespace
}  // namespace zt::data
