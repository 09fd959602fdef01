// Element-wise ops on the CPU backend: GELU's forward by formula (its backward by finite differences and
// in place is an op case, tests/ops/cases_activation.cpp), the residual add and accumulate with
// aliasing, scale, and dtype casts with their rounding.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/half.hpp"
#include "op_test_util.hpp"

namespace zt::backend::test {
namespace {

TEST(Gelu, ForwardIsTheTanhForm) {
  auto be = make_cpu_backend(3);
  Tensors ts(*be);
  Tensor x = ts.randn({37}, 1, 2.0f), y = ts.zeros({37});
  be->gelu_forward(y, x);
  for (int i = 0; i < 37; ++i) {
    const double v = Tensors::f(x)[i];
    const double want = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(Tensors::f(y)[i], want, 1e-6);
  }
}

TEST(Residual, AddMayAliasEitherInputAndAccumulateAdds) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  Tensor a = ts.randn({5, 3}, 1), b = ts.randn({5, 3}, 2), out = ts.zeros({5, 3});
  be->add(out, a, b);
  const std::vector<float> sum = values(out);
  be->add(a, a, b);
  EXPECT_EQ(values(a), sum);
  const std::vector<float> b_before = values(b);
  be->accumulate(b, out);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(Tensors::f(b)[i], b_before[i] + sum[i]);
  be->scale(out, 2.0f);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(Tensors::f(out)[i], 2.0f * sum[i]);
}

TEST(Cast, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);         // halfway: down to even
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);     // halfway: up to even
  EXPECT_EQ(f32_to_bf16(-2.5f), 0xc020);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(nan()))));
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
}

TEST(Cast, F16HandlesNormalsSubnormalsAndOverflow) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(0.1f), 0x2e66);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds past the largest half
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(0x1p-26f), 0x0000);  // rounds to zero
  EXPECT_EQ(f32_to_f16(-0x1p-14f), 0x8400);  // smallest normal
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half survives a round trip
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<std::uint16_t>(h))), h);
  }
}

TEST(Cast, BackendCastsBetweenF32AndHalfTypes) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  Tensor x = ts.randn({9}, 1), back = ts.zeros({9});
  for (DType half : {DType::kBF16, DType::kF16}) {
    Tensor h = ts.zeros({9}, half);
    be->cast(h, x);
    be->cast(back, h);
    for (int i = 0; i < 9; ++i) EXPECT_NEAR(Tensors::f(back)[i], Tensors::f(x)[i], 1e-2 * std::fabs(Tensors::f(x)[i]));
  }
  EXPECT_THROW(be->cast(ts.zeros({9}, DType::kI32), x), Error);
}

}  // namespace
}  // namespace zt::backend::test
