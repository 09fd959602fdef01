// quant/nf4 against nf4_reference.py (a PyTorch replay of bitsandbytes' quantize_4bit and
// quantize_blockwise): the same packed bytes, block scales, mean offset and nested 8-bit codes, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "golden.hpp"
#include "quant/nf4.hpp"

namespace zt::reference {
namespace {

class ReferenceNf4Golden : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip;
    g_ = golden_of("nf4_reference.py", ZT_REFERENCE_OUT "/nf4_golden.safetensors", skip);
    if (!g_) GTEST_SKIP() << skip;
  }
  const Golden* g_ = nullptr;
};
// The same golden file's cases, by name.
class ReferenceNf4 : public ReferenceNf4Golden, public ::testing::WithParamInterface<std::string> {};

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

void expect_bitwise(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(bits(got[i]), bits(want[i])) << what << " [" << i << "]";
}

TEST_F(ReferenceNf4Golden, DynamicMapIsTheDefinitions) {
  const auto& map = quant::dynamic_map();
  expect_bitwise(std::vector<float>(map.begin(), map.end()), g_->f32("dynamic_map"), "dynamic_map");
}

TEST_P(ReferenceNf4, SameBytesScalesAndNestedCodesAsBitsandbytes) {
  const std::string c = GetParam();
  const std::vector<float> x = g_->f32(c + ".x");
  const quant::Nf4Tensor plain = quant::quantize_nf4(x, 64, false);
  const std::vector<std::int32_t> packed = g_->i32(c + ".packed");
  ASSERT_EQ(plain.packed.size(), packed.size());
  for (std::size_t i = 0; i < packed.size(); ++i) ASSERT_EQ(int(plain.packed[i]), packed[i]) << c << " byte " << i;
  expect_bitwise(plain.absmax, g_->f32(c + ".absmax"), c + ".absmax");

  const quant::Nf4Tensor dq = quant::quantize_nf4(x, 64, true);
  EXPECT_EQ(dq.packed, plain.packed);
  EXPECT_EQ(bits(dq.offset), bits(g_->f32(c + ".offset")[0])) << dq.offset << " vs " << g_->f32(c + ".offset")[0];
  const std::vector<std::int32_t> nested = g_->i32(c + ".nested_codes");
  ASSERT_EQ(dq.nested_absmax.codes.size(), nested.size());
  for (std::size_t i = 0; i < nested.size(); ++i) ASSERT_EQ(int(dq.nested_absmax.codes[i]), nested[i]) << c << " scale " << i;
  expect_bitwise(dq.nested_absmax.absmax, g_->f32(c + ".nested_absmax"), c + ".nested_absmax");
}

INSTANTIATE_TEST_SUITE_P(Cases, ReferenceNf4, ::testing::Values("normal", "outliers", "zeros_then_values"));

}  // namespace
}  // namespace zt::reference
