// A fixture with both backends for GPU gtests (test_cuda_memory) and helpers for a hand-written CUDA-vs-CPU
// comparison. New op comparisons are op cases instead (tests/ops/op_case.hpp: one entry, run by one
// driver on every backend); a plain gtest written here is folded into the registry when it merges.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/half.hpp"

namespace zt::backend::test {

struct Precision {
  DType x;       // the compute dtype the CUDA op runs in
  double tol;    // normalised error allowed against the fp32 CPU reference
};

// fp32 to 1e-5 (summation order only); bf16 / f16 to a few units of their rounding (2^-9, 2^-11)
// on the outputs, the inputs being identical on both sides.
inline const std::vector<Precision> kPrecisions = {
    {DType::kF32, 1e-5}, {DType::kBF16, 2e-2}, {DType::kF16, 5e-3}};

inline int visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

// values rounded to dtype (round to nearest even) and back: what both backends see.
inline std::vector<float> rounded(const std::vector<float>& v, DType t) {
  std::vector<float> out(v);
  for (float& x : out) {
    if (t == DType::kBF16) x = bf16_to_f32(f32_to_bf16(x));
    if (t == DType::kF16) x = f16_to_f32(f32_to_f16(x));
  }
  return out;
}

inline std::vector<float> randn(std::size_t n, std::uint32_t seed, float sd = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline std::vector<std::int32_t> random_ints(std::size_t n, std::uint32_t seed, int below) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(0, below - 1);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// ||got - want|| / ||want|| in double (the absolute norm when want is all zero); NaN if either has one.
inline double norm_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

#define ZT_EXPECT_CLOSE(got, want, tol) \
  do {                                  \
    const double zt_err_ = ::zt::backend::test::norm_error((got), (want)); \
    EXPECT_LE(zt_err_, (tol)) << #got " vs " #want;                        \
  } while (0)

// Both backends and the buffers behind the tensors a test makes; GPU tests skip without a GPU.
class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (visible_gpus() == 0) GTEST_SKIP() << "no CUDA device visible: CUDA-vs-CPU op checks run on a lent GPU";
    gpu_ = make_cuda_backend(0);
    cpu_ = make_cpu_backend(2);
  }
  void TearDown() override {
    if (gpu_) gpu_->synchronize();  // surface asynchronous kernel faults in the test that caused them
    buffers_.clear();
  }

  // A GPU tensor of dtype t holding `values` (converted; values should already be rounded to t).
  Tensor gpu(const std::vector<float>& values, std::initializer_list<std::int64_t> dims, DType t) {
    Tensor shape(nullptr, t, dims);
    EXPECT_EQ(static_cast<std::size_t>(shape.numel()), values.size());
    std::vector<unsigned char> bytes(shape.bytes());
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (t == DType::kF32) std::memcpy(&bytes[i * 4], &values[i], 4);
      if (t == DType::kBF16 || t == DType::kF16) {
        const std::uint16_t h = t == DType::kBF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
        std::memcpy(&bytes[i * 2], &h, 2);
      }
    }
    return upload(*gpu_, bytes.data(), bytes.size(), t, dims);
  }
  Tensor gpu_ints(const std::vector<std::int32_t>& values, std::initializer_list<std::int64_t> dims) {
    return upload(*gpu_, values.data(), values.size() * 4, DType::kI32, dims);
  }
  Tensor cpu(const std::vector<float>& values, std::initializer_list<std::int64_t> dims) {
    return upload(*cpu_, values.data(), values.size() * 4, DType::kF32, dims);
  }
  Tensor cpu_ints(const std::vector<std::int32_t>& values, std::initializer_list<std::int64_t> dims) {
    return upload(*cpu_, values.data(), values.size() * 4, DType::kI32, dims);
  }

  // Any GPU tensor's values as fp32 (a stream sync); CPU tensors through cpu_values.
  std::vector<float> read(const Tensor& t) {
    std::vector<unsigned char> bytes(t.bytes());
    gpu_->copy_to_host(bytes.data(), t.data, bytes.size());
    std::vector<float> out(t.numel());
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (t.dtype == DType::kF32) std::memcpy(&out[i], &bytes[i * 4], 4);
      std::uint16_t h = 0;
      if (t.dtype == DType::kBF16 || t.dtype == DType::kF16) std::memcpy(&h, &bytes[i * 2], 2);
      if (t.dtype == DType::kBF16) out[i] = bf16_to_f32(h);
      if (t.dtype == DType::kF16) out[i] = f16_to_f32(h);
    }
    return out;
  }
  static std::vector<float> cpu_values(const Tensor& t) {
    const float* p = t.f32("test");
    return std::vector<float>(p, p + t.numel());
  }

  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<Backend> cpu_;

 private:
  Tensor upload(Backend& be, const void* host, std::size_t bytes, DType t, std::initializer_list<std::int64_t> dims) {
    buffers_.push_back(be.allocate(bytes ? bytes : 1));
    Tensor out = buffers_.back().view(t, dims);
    if (bytes) be.copy_from_host(out.data, host, bytes);
    return out;
  }
  std::vector<Buffer> buffers_;  // declared after the backends: freed before them
};

}  // namespace zt::backend::test
