// CUDA element-wise ops against the CPU reference in fp32, bf16 and f16: GELU (in place), add (output
// aliasing either input), accumulate, scale, every cast direction, fill_zero, the fused AdamW step with
// its working copy, and sum_of_squares (including NaN/inf propagation). n is not a multiple of 256.
#include <limits>
#include <utility>

#include "tests/gpu/cuda_op_test_util.hpp"

namespace zt::backend::test {
namespace {

using CudaPointwise = CudaVsCpu;
constexpr std::int64_t kN = 1000 + 37;

// LoRA's dropout: the GPU's Philox mask is the CPU's bit for bit (the same elements zero), the kept
// values scaled by 1/(1-p) within the dtype's rounding; in place too; a counter offset past 2^32.
TEST_F(CudaPointwise, DropoutDropsTheCpusElements) {
  for (const Precision& p : kPrecisions) {
    SCOPED_TRACE(std::string(dtype_name(p.x)));
    const auto x = rounded(randn(kN, 70), p.x);
    for (const std::uint64_t first : {std::uint64_t{0}, (std::uint64_t{1} << 32) - 5}) {
      Tensor g_x = gpu(x, {kN}, p.x), g_y = gpu(std::vector<float>(kN), {kN}, p.x);
      gpu_->dropout(g_y, g_x, 0.3f, 1234, 99, first);
      Tensor c_x = cpu(x, {kN}), c_y = cpu(std::vector<float>(kN), {kN});
      cpu_->dropout(c_y, c_x, 0.3f, 1234, 99, first);
      const std::vector<float> g = read(g_y), c = cpu_values(c_y);
      for (std::int64_t i = 0; i < kN; ++i) ASSERT_EQ(g[i] == 0.0f, c[i] == 0.0f) << "element " << i;
      ZT_EXPECT_CLOSE(g, c, p.tol);
      gpu_->dropout(g_x, g_x, 0.3f, 1234, 99, first);  // in place: the same mask
      ZT_EXPECT_CLOSE(read(g_x), g, 0.0);
    }
  }
}

// A column block of a wider matrix (row_stride: a TP rank's input columns) drops the CPU's elements too.
TEST_F(CudaPointwise, DropoutWithARowStrideDropsTheCpusElements) {
  const std::int64_t rows = 129, block = 40, stride = 3 * block;
  const auto x = randn(rows * block, 71);
  Tensor g_x = gpu(x, {rows, block}, DType::kF32);
  Tensor g_y = gpu(std::vector<float>(rows * block), {rows, block}, DType::kF32);
  gpu_->dropout(g_y, g_x, 0.3f, 1234, 99, 7 + block, stride);
  Tensor c_x = cpu(x, {rows, block}), c_y = cpu(std::vector<float>(rows * block), {rows, block});
  cpu_->dropout(c_y, c_x, 0.3f, 1234, 99, 7 + block, stride);
  const std::vector<float> g = read(g_y), c = cpu_values(c_y);
  for (std::int64_t i = 0; i < rows * block; ++i) ASSERT_EQ(g[i] == 0.0f, c[i] == 0.0f) << "element " << i;
  ZT_EXPECT_CLOSE(g, c, 1e-6);
}

TEST_F(CudaPointwise, GeluForwardAndInPlaceBackwardMatchCpu) {
  for (const Precision& p : kPrecisions) {
    SCOPED_TRACE(std::string(dtype_name(p.x)));
    auto x = randn(kN, 60, 3.0f);
    x[0] = -12.0f;  // e^{-2u} overflows fp32 here: the clamp must keep backward finite
    x[1] = 9.0f;
    x = rounded(x, p.x);
    const auto dy = rounded(randn(kN, 61), p.x);
    Tensor g_x = gpu(x, {kN}, p.x), g_y = gpu(std::vector<float>(kN), {kN}, p.x);
    gpu_->gelu_forward(g_y, g_x);
    Tensor c_x = cpu(x, {kN}), c_y = cpu(std::vector<float>(kN), {kN});
    cpu_->gelu_forward(c_y, c_x);
    ZT_EXPECT_CLOSE(read(g_y), cpu_values(c_y), p.tol);

    Tensor g_d = gpu(dy, {kN}, p.x), c_d = cpu(dy, {kN});
    gpu_->gelu_backward(g_d, g_x, g_d);  // dinp aliases dout
    cpu_->gelu_backward(c_d, c_x, c_d);
    const auto got = read(g_d);
    ZT_EXPECT_CLOSE(got, cpu_values(c_d), p.tol);
    EXPECT_TRUE(std::isfinite(got[0]));
  }
}

TEST_F(CudaPointwise, AddWithAliasedOutputAccumulateAndScaleMatchCpu) {
  for (const Precision& p : kPrecisions) {
    SCOPED_TRACE(std::string(dtype_name(p.x)));
    const auto a = rounded(randn(kN, 70), p.x), b = rounded(randn(kN, 71), p.x);
    std::vector<float> want(kN);
    for (std::int64_t i = 0; i < kN; ++i) want[i] = a[i] + b[i];

    Tensor g_out = gpu(std::vector<float>(kN), {kN}, p.x);
    gpu_->add(g_out, gpu(a, {kN}, p.x), gpu(b, {kN}, p.x));
    ZT_EXPECT_CLOSE(read(g_out), want, p.tol);
    Tensor g_a = gpu(a, {kN}, p.x), g_b = gpu(b, {kN}, p.x);
    gpu_->add(g_a, g_a, g_b);  // out aliases a
    ZT_EXPECT_CLOSE(read(g_a), want, p.tol);
    Tensor g_a2 = gpu(a, {kN}, p.x), g_b2 = gpu(b, {kN}, p.x);
    gpu_->add(g_b2, g_a2, g_b2);  // out aliases b
    ZT_EXPECT_CLOSE(read(g_b2), want, p.tol);

    Tensor g_acc = gpu(a, {kN}, p.x), c_acc = cpu(a, {kN});
    gpu_->accumulate(g_acc, gpu(b, {kN}, p.x));
    cpu_->accumulate(c_acc, cpu(b, {kN}));
    ZT_EXPECT_CLOSE(read(g_acc), cpu_values(c_acc), p.tol);

    Tensor g_s = gpu(a, {kN}, p.x), c_s = cpu(a, {kN});
    gpu_->scale(g_s, 0.37f);
    cpu_->scale(c_s, 0.37f);
    ZT_EXPECT_CLOSE(read(g_s), cpu_values(c_s), p.tol);

    gpu_->fill_zero(g_s);
    EXPECT_EQ(read(g_s), std::vector<float>(kN, 0.0f));
  }
}

// Views one element past a 16-byte boundary take the scalar loop of the packed element-wise kernels
// (vector_map.cuh); an aligned output with a misaligned input must not take the packed one either.
TEST_F(CudaPointwise, MisalignedViewsTakeTheScalarPathAndMatchCpu) {
  for (const Precision& p : kPrecisions) {
    SCOPED_TRACE(std::string(dtype_name(p.x)));
    const auto a = rounded(randn(kN + 1, 80), p.x), b = rounded(randn(kN + 1, 81), p.x);
    const auto past_first = [&](const Tensor& t) {
      return Tensor(static_cast<char*>(t.data) + dtype_size(p.x), p.x, {kN});
    };
    const auto tail = [](const std::vector<float>& v) { return std::vector<float>(v.begin() + 1, v.end()); };
    Tensor g_a = gpu(a, {kN + 1}, p.x), g_b = gpu(b, {kN + 1}, p.x);
    Tensor g_out = gpu(std::vector<float>(kN), {kN}, p.x);  // aligned, inputs not
    gpu_->add(g_out, past_first(g_a), past_first(g_b));
    std::vector<float> want(kN);
    for (std::int64_t i = 0; i < kN; ++i) want[i] = a[i + 1] + b[i + 1];
    ZT_EXPECT_CLOSE(read(g_out), want, p.tol);

    Tensor c_x = cpu(tail(a), {kN}), c_y = cpu(std::vector<float>(kN), {kN});
    cpu_->gelu_forward(c_y, c_x);
    gpu_->gelu_forward(past_first(g_b), past_first(g_a));  // both misaligned
    ZT_EXPECT_CLOSE(tail(read(g_b)), cpu_values(c_y), p.tol);
  }
}

// Every direction between f32, bf16 and f16, exactly: one rounding to nearest even of the fp32 value.
TEST_F(CudaPointwise, CastRoundsToNearestEvenInEveryDirection) {
  auto values = randn(kN, 80, 10.0f);
  values[0] = std::numeric_limits<float>::quiet_NaN();
  values[1] = 1e6f;     // beyond f16: inf
  values[2] = 1e-7f;    // an f16 subnormal
  values[3] = -0.0f;
  for (const DType from : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const DType to : {DType::kF32, DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(cat(dtype_name(from), " -> ", dtype_name(to)));
      const auto src = rounded(values, from);
      Tensor g_dst = gpu(std::vector<float>(kN), {kN}, to);
      gpu_->cast(g_dst, gpu(src, {kN}, from));
      const auto got = read(g_dst), want = rounded(src, to);
      for (std::int64_t i = 0; i < kN; ++i) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(got[i])) << i;
        } else {
          ASSERT_EQ(got[i], want[i]) << "element " << i << " from " << src[i];
          ASSERT_EQ(std::signbit(got[i]), std::signbit(want[i])) << i;
        }
      }
    }
  }
}

// Two steps of AdamW with and without the working copy, grad_scale != 1 and weight decay on.
TEST_F(CudaPointwise, AdamWMatchesCpuAndWritesTheWorkingCopy) {
  const auto p0 = randn(kN, 90), g = randn(kN, 91), m0 = randn(kN, 92, 0.1f);
  auto v0 = randn(kN, 93, 0.1f);
  for (float& x : v0) x = x * x;
  for (const Precision& p : kPrecisions) {
    SCOPED_TRACE(std::string(dtype_name(p.x)));
    Tensor g_p = gpu(p0, {kN}, DType::kF32), g_g = gpu(g, {kN}, DType::kF32);
    Tensor g_m = gpu(m0, {kN}, DType::kF32), g_v = gpu(v0, {kN}, DType::kF32);
    Tensor g_copy = gpu(std::vector<float>(kN), {kN}, p.x);
    Tensor c_p = cpu(p0, {kN}), c_g = cpu(g, {kN}), c_m = cpu(m0, {kN}), c_v = cpu(v0, {kN});
    for (int step = 1; step <= 2; ++step) {
      const Backend::AdamW hp{6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f};
      gpu_->adamw_update(g_p, g_g, g_m, g_v, step == 2 ? g_copy : Tensor(), hp);
      cpu_->adamw_update(c_p, c_g, c_m, c_v, Tensor(), hp);
    }
    ZT_EXPECT_CLOSE(read(g_p), cpu_values(c_p), 1e-6);
    ZT_EXPECT_CLOSE(read(g_m), cpu_values(c_m), 1e-6);
    ZT_EXPECT_CLOSE(read(g_v), cpu_values(c_v), 1e-6);
    const auto copy = read(g_copy), master = read(g_p);
    EXPECT_EQ(copy, rounded(master, p.x)) << "the working copy is the master rounded to nearest even";
  }
}

TEST_F(CudaPointwise, SumOfSquaresMatchesCpuAndPropagatesNonFinite) {
  const std::int64_t n = 100003;  // not a multiple of the fixed 1024 x 256 grid: a ragged last pass
  for (const Precision& p : kPrecisions) {
    SCOPED_TRACE(std::string(dtype_name(p.x)));
    const auto x = rounded(randn(n, 100), p.x);
    const double want = cpu_->sum_of_squares(cpu(x, {n}));
    EXPECT_NEAR(gpu_->sum_of_squares(gpu(x, {n}, p.x)), want, 1e-9 * want);
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      auto y = x;
      y[n / 2] = bad;
      const double got = gpu_->sum_of_squares(gpu(y, {n}, p.x));
      EXPECT_TRUE(std::isnan(bad) ? std::isnan(got) : std::isinf(got)) << got;
    }
  }
  EXPECT_EQ(gpu_->sum_of_squares(gpu({}, {0}, DType::kF32)), 0.0);
}

}  // namespace
}  // namespace zt::backend::test
