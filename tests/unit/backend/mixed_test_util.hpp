// The fixture of the mixed-precision op tests: one compute dtype X per instantiation, tensors made in
// pairs (the X run's tensor and the f32 run's twin holding the same values), and the tolerances.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "op_test_util.hpp"

namespace zt::backend::test {

// X outputs. Each op does the fp32 op's math on the same values and rounds the result once to nearest,
// so each element is within u*|y| of the f32 op's output, u = 2^-8 for bf16 (8 significant bits) and
// 2^-11 for f16 (11), and so is the normalised error. kReassociation covers fp32 sums added in another
// order (the loops are compiled per storage type, and vector widths may differ): about sqrt(n) * 2^-24
// for our sizes, well under 1e-5.
constexpr double kReassociation = 1e-5;
// f32 outputs (LayerNorm mean/rstd, lse, losses, parameter gradients): the same fp32 math on the same
// values, so only reassociation separates them.
constexpr double kF32Tol = kReassociation;

inline double unit_roundoff(DType x) { return x == DType::kBF16 ? 0x1p-8 : 0x1p-11; }

inline std::string compute_dtype_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

class MixedPrecision : public ::testing::TestWithParam<DType> {
 protected:
  // x: the tensor the X run uses; f: the f32 run's twin with the same values. Both empty by default.
  struct Pair {
    Tensor x, f;
  };

  DType X() const { return GetParam(); }
  double x_tol() const { return unit_roundoff(X()) + kReassociation; }

  // N(0, sd^2) values rounded to X, and the same values in f32.
  Pair randn(std::initializer_list<std::int64_t> dims, std::uint32_t seed, float sd = 1.0f) {
    Tensor x = ts.randn(dims, seed, sd, X());
    return {x, ts.as(x, DType::kF32)};
  }
  // An output to be written, pre-filled with NaN so that an op that skips an element fails.
  Pair unwritten(std::initializer_list<std::int64_t> dims) {
    return {ts.filled(dims, nan(), X()), ts.filled(dims, nan())};
  }
  // An f32 output in both runs (statistics, lse, losses).
  Pair f32_pair(std::initializer_list<std::int64_t> dims) { return {ts.zeros(dims), ts.zeros(dims)}; }
  // An f32 parameter gradient in both runs, starting from the same nonzero values: an op that wrote (=)
  // instead of accumulating (+=) would lose them.
  Pair grads(std::initializer_list<std::int64_t> dims, std::uint32_t seed) {
    Tensor g = ts.randn(dims, seed + 100);
    return {g, ts.as(g, DType::kF32)};
  }

  void expect_close(const Tensor& got, const Tensor& want, double tol, const char* what) const {
    EXPECT_LT(norm_error(got, want), tol) << what << " (" << dtype_name(got.dtype) << ") against f32, X = "
                                          << dtype_name(X());
  }

  std::unique_ptr<Backend> be = make_cpu_backend(3);
  Tensors ts{*be};
};

}  // namespace zt::backend::test
