// Helpers for the CPU op tests: tensors filled from seeded host data, finite differences of a scalar
// objective in double, and the normalised error used everywhere (||got - want|| / ||want||).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.hpp"

namespace zt::backend::test {

// Owns the buffers behind the tensors it hands out; CPU memory, so tests read and write them directly.
class Tensors {
 public:
  explicit Tensors(Backend& be) : be_(be) {}
  Tensor zeros(std::initializer_list<std::int64_t> dims, DType dtype = DType::kF32) {
    Tensor shape(nullptr, dtype, dims);
    bufs_.push_back(be_.allocate(shape.bytes() ? shape.bytes() : 1));
    Tensor t = bufs_.back().view(dtype, dims);
    be_.fill_zero(t);
    return t;
  }
  // N(0, sd^2) values from a seeded generator.
  Tensor randn(std::initializer_list<std::int64_t> dims, std::uint32_t seed, float sd = 1.0f) {
    Tensor t = zeros(dims);
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, sd);
    for (std::int64_t i = 0; i < t.numel(); ++i) f(t)[i] = dist(gen);
    return t;
  }
  Tensor filled(std::initializer_list<std::int64_t> dims, float value) {
    Tensor t = zeros(dims);
    for (std::int64_t i = 0; i < t.numel(); ++i) f(t)[i] = value;
    return t;
  }
  Tensor ints(std::initializer_list<std::int64_t> dims, const std::vector<std::int32_t>& values) {
    Tensor t = zeros(dims, DType::kI32);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.i32("test")[i] = values.at(i);
    return t;
  }
  static float* f(const Tensor& t) { return t.f32("test"); }

 private:
  Backend& be_;
  std::vector<Buffer> bufs_;
};

inline std::vector<float> values(const Tensor& t) {
  const float* p = t.f32("test");
  return std::vector<float>(p, p + t.numel());
}

inline float nan() { return std::numeric_limits<float>::quiet_NaN(); }

// sum_i w[i] * x[i] in double: the scalar objective whose gradient w.r.t. x is w.
inline double dot(const Tensor& x, const Tensor& w) {
  double s = 0.0;
  for (std::int64_t i = 0; i < x.numel(); ++i) s += static_cast<double>(x.f32("test")[i]) * w.f32("test")[i];
  return s;
}

// ||got - want|| / ||want|| (0 when both are zero).
inline double norm_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  if (den == 0.0) return std::sqrt(num);
  return std::sqrt(num / den);
}
inline double norm_error(const Tensor& got, const std::vector<double>& want) {
  std::vector<float> g = values(got);
  return norm_error(std::vector<double>(g.begin(), g.end()), want);
}

// Central differences dL/dx_i = (L(x + eps e_i) - L(x - eps e_i)) / (2 eps) for every element of x,
// where objective() recomputes the forward from the current contents of x.
inline std::vector<double> numeric_grad(const Tensor& x, const std::function<double()>& objective,
                                        float eps = 1e-2f) {
  float* p = x.f32("test");
  std::vector<double> grad(x.numel());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float keep = p[i], hi = keep + eps, lo = keep - eps;  // the step actually taken in fp32
    p[i] = hi;
    const double up = objective();
    p[i] = lo;
    const double down = objective();
    p[i] = keep;
    grad[i] = (up - down) / (static_cast<double>(hi) - static_cast<double>(lo));
  }
  return grad;
}

// Finite differences in fp32 carry ~1e-4 relative noise at eps=1e-2; a wrong formula is off by O(1).
constexpr double kFdTolerance = 2e-3;

}  // namespace zt::backend::test
