// The ZeRO partition: balanced padded slices of every unit, pieces that cover each rank's elements
// exactly once with the right decay flag, for 1, 2, 3 and 4 ranks and units smaller than the world.
#include <gtest/gtest.h>

#include <vector>

#include "optim/zero/partition.hpp"

namespace zt::optim {
namespace {

// Units of 10, 3 and 7 elements; parameters inside them with alternating decay.
std::vector<FlatRange> units() { return {{0, 10}, {10, 3}, {13, 7}}; }
std::vector<ParamRange> params() {
  return {{{0, 6}, true}, {{6, 4}, false}, {{10, 1}, false}, {{11, 2}, true}, {{13, 7}, true}};
}

TEST(Partition, SlicesArePaddedToTheWorldSize) {
  Partition p(units(), params(), 4, 0);
  EXPECT_EQ(p.shard_numel(0), 3);  // 10 -> 12 / 4
  EXPECT_EQ(p.shard_numel(1), 1);  // 3 -> 4 / 4
  EXPECT_EQ(p.shard_numel(2), 2);  // 7 -> 8 / 4
  EXPECT_EQ(p.total_shard_numel(), 6);
  EXPECT_EQ(p.total_padded_numel(), 24);
  EXPECT_EQ(p.padded_offset(2), 16);
  EXPECT_EQ(p.owned(0, 3).numel, 1);  // elements 9..9
  EXPECT_EQ(p.owned(1, 3).numel, 0);  // a unit smaller than the world leaves the last rank empty
}

TEST(Partition, PiecesCoverEveryElementOnceAcrossRanks) {
  for (int world : {1, 2, 3, 4, 7}) {
    std::vector<int> covered(20, 0);
    std::vector<int> decay(20, -1);
    for (int r = 0; r < world; ++r) {
      Partition p(units(), params(), world, r);
      std::int64_t shard_used = 0;
      for (const ShardPiece& piece : p.pieces()) {
        EXPECT_LT(piece.shard_offset + piece.numel, p.total_shard_numel() + 1);
        for (std::int64_t i = 0; i < piece.numel; ++i) {
          covered[piece.flat_offset + i]++;
          decay[piece.flat_offset + i] = piece.decay;
        }
        shard_used += piece.numel;
      }
      EXPECT_LE(shard_used, p.total_shard_numel());
    }
    for (int i = 0; i < 20; ++i) EXPECT_EQ(covered[i], 1) << "element " << i << " world " << world;
    EXPECT_EQ(decay[7], 0);
    EXPECT_EQ(decay[12], 1);
  }
}

TEST(Partition, ShardOffsetsMatchTheSliceLayout) {
  Partition p(units(), params(), 2, 1);
  // Rank 1 owns unit 0 elements 5..9 (shard offsets 0..4), unit 1 element 12 (shard offset 5+0),
  // unit 2 elements 17..19 (shard offset 7+0..2).
  ASSERT_FALSE(p.pieces().empty());
  EXPECT_EQ(p.pieces()[0].flat_offset, 5);
  EXPECT_EQ(p.pieces()[0].shard_offset, 0);
  EXPECT_EQ(p.pieces()[0].numel, 1);  // element 5: end of the first decay param
  bool found = false;
  for (const ShardPiece& s : p.pieces())
    if (s.flat_offset == 17) found = (s.shard_offset == 7 && s.numel == 3);
  EXPECT_TRUE(found);
}

TEST(Intersect, OverlapAndDisjoint) {
  EXPECT_EQ(intersect({0, 10}, {5, 10}).numel, 5);
  EXPECT_EQ(intersect({0, 10}, {5, 10}).offset, 5);
  EXPECT_EQ(intersect({0, 5}, {5, 10}).numel, 0);
}

}  // namespace
}  // namespace zt::optim
