// Helpers for the CPU op tests: tensors filled from seeded host data (f32, or bf16/f16 holding values
// rounded to that dtype), and the normalised error used everywhere (||got - want|| / ||want||).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "backend/half.hpp"

namespace zt::backend::test {

// value rounded to dtype (nearest even) and read back as a float; f32 unchanged.
inline float round_to(float value, DType dtype) {
  if (dtype == DType::kBF16) return bf16_to_f32(f32_to_bf16(value));
  if (dtype == DType::kF16) return f16_to_f32(f32_to_f16(value));
  return value;
}

// Element i of a float tensor (f32, bf16 or f16) as a float, and the other way round (rounding).
inline float get(const Tensor& t, std::int64_t i) {
  if (t.dtype == DType::kF32) return t.f32("test")[i];
  const std::uint16_t bits = static_cast<const std::uint16_t*>(t.data)[i];
  return t.dtype == DType::kBF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}
inline void set(const Tensor& t, std::int64_t i, float value) {
  if (t.dtype == DType::kF32) {
    t.f32("test")[i] = value;
    return;
  }
  static_cast<std::uint16_t*>(t.data)[i] = t.dtype == DType::kBF16 ? f32_to_bf16(value) : f32_to_f16(value);
}

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
  // N(0, sd^2) values from a seeded generator (rounded to dtype).
  Tensor randn(std::initializer_list<std::int64_t> dims, std::uint32_t seed, float sd = 1.0f,
               DType dtype = DType::kF32) {
    Tensor t = zeros(dims, dtype);
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, sd);
    for (std::int64_t i = 0; i < t.numel(); ++i) set(t, i, dist(gen));
    return t;
  }
  Tensor filled(std::initializer_list<std::int64_t> dims, float value, DType dtype = DType::kF32) {
    Tensor t = zeros(dims, dtype);
    for (std::int64_t i = 0; i < t.numel(); ++i) set(t, i, value);
    return t;
  }
  // A new tensor of t's shape holding t's values in dtype (rounded when narrower).
  Tensor as(const Tensor& t, DType dtype) {
    Tensor out = t;
    out.dtype = dtype;
    bufs_.push_back(be_.allocate(out.bytes() ? out.bytes() : 1));
    out.data = bufs_.back().data();
    for (std::int64_t i = 0; i < t.numel(); ++i) set(out, i, get(t, i));
    return out;
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

// The elements of a float tensor of any float dtype, as floats.
inline std::vector<float> values(const Tensor& t) {
  std::vector<float> v(t.numel());
  for (std::int64_t i = 0; i < t.numel(); ++i) v[i] = get(t, i);
  return v;
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
inline double norm_error(const Tensor& got, const Tensor& want) {
  std::vector<float> w = values(want);
  return norm_error(got, std::vector<double>(w.begin(), w.end()));
}

}  // namespace zt::backend::test
