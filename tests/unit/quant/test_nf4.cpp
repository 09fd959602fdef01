// NF4 blocks and double quantization (quant/nf4.hpp): the packing, the rounding rule, the error bound,
// the scales' storage and the bits a parameter costs. Bit-exactness with bitsandbytes is
// tests/reference/test_reference_nf4.cpp's.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "quant/nf4.hpp"
#include "tests/unit/quant/normal_values.hpp"

namespace zt::quant {
namespace {

using testing::normal;

TEST(Nf4, LevelsAndMapAreAscendingWithExactEnds) {
  const auto& l = nf4_levels();
  const auto& m = dynamic_map();
  for (std::size_t i = 1; i < l.size(); ++i) EXPECT_LT(l[i - 1], l[i]);
  for (std::size_t i = 1; i < m.size(); ++i) EXPECT_LT(m[i - 1], m[i]);
  EXPECT_EQ(l[0], -1.0f);
  EXPECT_EQ(l[7], 0.0f);
  EXPECT_EQ(l[15], 1.0f);
  EXPECT_EQ(m[255], 1.0f);
}

// Element 0 in the high nibble; a value on a level keeps it; a midpoint goes to the lower level.
TEST(Nf4, PackingAndRounding) {
  const auto& l = nf4_levels();
  const std::vector<float> x{l[15], l[0], l[7], (l[9] + l[10]) / 2, l[3]};  // absmax 1: scaled = x
  const Nf4Tensor t = quantize_nf4(x);
  ASSERT_EQ(t.packed.size(), 3u);
  EXPECT_EQ(t.packed[0], (15 << 4) | 0);
  EXPECT_EQ(t.packed[1], (7 << 4) | 9);
  EXPECT_EQ(t.packed[2], (3 << 4) | 7);  // the odd count's last byte ends with 0.0's code, as bitsandbytes pads
  const std::vector<float> back = dequantize_nf4(t);
  EXPECT_EQ(back, (std::vector<float>{l[15], l[0], l[7], l[9], l[3]}));
}

// Every value comes back within half the widest gap between levels times its block's absmax, and each
// block's absmax value itself exactly (the level +-1).
TEST(Nf4, RoundTripErrorIsBoundedPerBlock) {
  const std::vector<float> x = normal(64 * 50 + 17, 0.02f, 3);
  const Nf4Tensor t = quantize_nf4(x);
  const std::vector<float> back = dequantize_nf4(t);
  const auto& l = nf4_levels();
  float gap = 0;
  for (std::size_t i = 1; i < l.size(); ++i) gap = std::max(gap, l[i] - l[i - 1]);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float scale = t.absmax[i / 64];
    ASSERT_LE(std::fabs(back[i] - x[i]), gap / 2 * scale * 1.0001f) << i;
    if (std::fabs(x[i]) == scale) {
      ASSERT_EQ(back[i], x[i]) << i;
    }
  }
}

TEST(Nf4, ZeroBlockStaysZero) {
  std::vector<float> x(128, 0.0f);
  x[100] = 0.5f;
  const std::vector<float> back = dequantize_nf4(quantize_nf4(x));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(back[i], 0.0f);
  EXPECT_EQ(back[100], 0.5f);
}

// Double quantization keeps the codes and stores the scales in 8 bits: each scale within the 8-bit map's
// step of its block's largest centred value, at 0.5 + 1/64 + 4/(64 x 256) bytes a parameter (4.127 bits,
// QLoRA section 3), against 4.5 bits without.
TEST(Nf4, DoubleQuantizationCostsAndAccuracy) {
  const std::size_t n = 64 * 256 * 4;
  const std::vector<float> x = normal(n, 0.02f, 5);
  const Nf4Tensor plain = quantize_nf4(x), dq = quantize_nf4(x, 64, true);
  EXPECT_EQ(dq.packed, plain.packed);
  EXPECT_TRUE(dq.absmax.empty());
  const std::vector<float> scales = block_scales(dq);
  ASSERT_EQ(scales.size(), plain.absmax.size());
  for (std::size_t k = 0; k < scales.size(); ++k) {
    const float centred_max = dq.nested_absmax.absmax[k / 256];
    EXPECT_NEAR(scales[k], plain.absmax[k], centred_max * 0.02f + 1e-9f) << k;
  }
  EXPECT_NEAR(8.0 * static_cast<double>(dq.bytes()) / n, 4.127, 0.001);
  EXPECT_NEAR(8.0 * static_cast<double>(plain.bytes()) / n, 4.5, 1e-9);
}

TEST(Nf4, BlockSizeOutsideBitsandbytesChoicesIsRefused) {
  const std::vector<float> x(100, 1.0f);
  EXPECT_THROW(quantize_nf4(x, 48), ConfigError);
  EXPECT_THROW(quantize_nf4(x, 16), ConfigError);
  EXPECT_THROW(quantize_blockwise8(x, 8192), ConfigError);
  EXPECT_NO_THROW(quantize_nf4(x, 32));
}

}  // namespace
}  // namespace zt::quant
