// Dropout on the CPU backend (LoRA's lora_dropout): the mask is Philox's (seed, stream, index) and
// nothing else: the same for any thread count and for a slice started at its offset, another stream or
// seed gives another mask, about p of the elements drop, the kept ones scale by 1/(1-p), in place too;
// a block of columns with the whole width as row_stride gets the whole matrix's mask (a TP rank's).
#include <gtest/gtest.h>

#include <cstring>

#include "op_test_util.hpp"

namespace zt::backend::test {
namespace {

TEST(Dropout, MaskIsAFunctionOfSeedStreamAndIndexOnly) {
  auto one = make_cpu_backend(1), three = make_cpu_backend(3);
  Tensors ts(*one);
  const std::int64_t n = 4099;
  const float p = 0.25f;
  Tensor x = ts.randn({n}, 1), y1 = ts.zeros({n}), y3 = ts.zeros({n}), tail = ts.zeros({n - 1000});
  one->dropout(y1, x, p, 7, 3, 0);
  three->dropout(y3, x, p, 7, 3, 0);
  EXPECT_EQ(std::memcmp(y1.data, y3.data, y1.bytes()), 0) << "the thread split changed the mask";
  Tensor x_tail(Tensors::f(x) + 1000, DType::kF32, {n - 1000});
  one->dropout(tail, x_tail, p, 7, 3, 1000);  // a slice at its offset: the whole tensor's values
  EXPECT_EQ(std::memcmp(Tensors::f(tail), Tensors::f(y1) + 1000, tail.bytes()), 0);
  std::int64_t dropped = 0, differ = 0;
  Tensor other = ts.zeros({n});
  one->dropout(other, x, p, 7, 4, 0);  // another stream
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = Tensors::f(y1)[i];
    if (v == 0.0f) ++dropped;
    else EXPECT_FLOAT_EQ(v, Tensors::f(x)[i] / (1 - p));
    differ += (v == 0.0f) != (Tensors::f(other)[i] == 0.0f);
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.03);
  EXPECT_GT(differ, n / 10);
  one->dropout(x, x, p, 7, 3, 0);  // in place
  EXPECT_EQ(std::memcmp(x.data, y1.data, x.bytes()), 0);
  Tensor z = ts.zeros({n});
  one->dropout(z, y1, 0.0f, 7, 3, 0);  // p = 0 keeps everything unscaled
  EXPECT_EQ(std::memcmp(z.data, y1.data, z.bytes()), 0);
  EXPECT_THROW(one->dropout(z, y1, 1.0f, 7, 3, 0), Error);
}

TEST(Dropout, AColumnBlockWithTheWholeRowStrideGetsTheWholeMatrixsMask) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const std::int64_t rows = 37, width = 24, block = 8, at = 2 * block;  // rank 2 of 3: columns [16, 24)
  const float p = 0.4f;
  Tensor x = ts.randn({rows, width}, 2), whole = ts.zeros({rows, width});
  be->dropout(whole, x, p, 11, 5, 1000);
  std::vector<float> mine(static_cast<std::size_t>(rows * block));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < block; ++c) mine[r * block + c] = Tensors::f(x)[r * width + at + c];
  Tensor part(mine.data(), DType::kF32, {rows, block});
  be->dropout(part, part, p, 11, 5, 1000 + at, width);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < block; ++c)
      ASSERT_EQ(mine[r * block + c], Tensors::f(whole)[r * width + at + c]) << "row " << r << ", column " << c;
  Tensor same = ts.zeros({rows, width});
  be->dropout(same, x, p, 11, 5, 1000, width);  // the row length itself: the contiguous mask
  EXPECT_EQ(std::memcmp(same.data, whole.data, same.bytes()), 0);
  EXPECT_THROW(be->dropout(part, part, p, 11, 5, 0, block - 1), Error);  // rows would overlap
}

}  // namespace
}  // namespace zt::backend::test
