// The counter-based RNG: Philox4x32-10 known answers (Random123's kat_vectors), normals with the right
// moments, and values that depend only on (seed, purpose, index), wherever a range starts.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.hpp"

namespace zt::rng {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
  using A4 = std::array<std::uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}), (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Normal, HasZeroMeanAndUnitVariance) {
  const int n = 200000;
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    const double z = normal(42, 7, i);
    sum += z;
    sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
}

TEST(Normal, DependsOnlyOnSeedPurposeAndIndex) {
  std::vector<float> whole(101), part(40);
  fill_normal(3, purpose_id("x"), 0, whole.data(), whole.size(), 0.0f, 1.0f);
  for (std::uint64_t start : {0u, 1u, 17u, 60u}) {  // even and odd starts
    fill_normal(3, purpose_id("x"), start, part.data(), part.size(), 0.0f, 1.0f);
    for (std::size_t i = 0; i < part.size() && start + i < whole.size(); ++i)
      ASSERT_EQ(part[i], whole[start + i]) << start << "+" << i;
  }
  EXPECT_NE(normal(3, purpose_id("x"), 5), normal(4, purpose_id("x"), 5));
  EXPECT_NE(normal(3, purpose_id("x"), 5), normal(3, purpose_id("y"), 5));
}

TEST(Uniform, StaysInTheUnitInterval) {
  for (int i = 0; i < 1000; ++i) {
    const double u = uniform(1, 2, i);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace zt::rng
