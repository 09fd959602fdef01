// The registry entry's builders and value generators, and the lookups by argument name.
#include "tests/ops/op_case.hpp"

#include <random>

namespace zt::backend::ops {

Arg in(std::string name, Dims dims, Values v, Kind k) {
  Arg a;
  a.name = std::move(name), a.dims = std::move(dims), a.kind = k, a.values = std::move(v);
  return a;
}

Arg out(std::string name, Dims dims, Kind k) {
  Arg a = in(std::move(name), std::move(dims), Values(), k);
  a.role = Role::kOut;
  return a;
}

Arg inout(std::string name, Dims dims, Values v, Kind k) {
  Arg a = in(std::move(name), std::move(dims), std::move(v), k);
  a.role = Role::kInOut;
  return a;
}

Arg grad(std::string name, Dims dims, Values v, Kind k) {
  Arg a = in(std::move(name), std::move(dims), std::move(v), k);
  a.role = Role::kGrad;
  a.stage = Stage::kBackward;
  return a;
}

Arg ids(std::string name, Dims dims, Values v) {
  return in(std::move(name), std::move(dims), std::move(v), Kind::kI32);
}

Values normal(std::uint32_t seed, float sd) {
  return [=](std::size_t n) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = dist(gen);
    return v;
  };
}

Values uniform_ints(std::uint32_t seed, int below) {
  return [=](std::size_t n) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> dist(0, below - 1);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(dist(gen));
    return v;
  };
}

Values given(std::vector<float> v) {
  return [v = std::move(v)](std::size_t n) {
    ZT_CHECK_EQ(v.size(), n, "given(): the argument holds ", n, " elements, the values ", v.size());
    return v;
  };
}

Values filled(float value) {
  return [=](std::size_t n) { return std::vector<float>(n, value); };
}

Values with_at(Values base, std::vector<std::pair<std::size_t, float>> set) {
  return [base = std::move(base), set = std::move(set)](std::size_t n) {
    std::vector<float> v = base(n);
    for (const auto& [i, x] : set) v.at(i) = x;
    return v;
  };
}

Values squared(Values base) {
  return [base = std::move(base)](std::size_t n) {
    std::vector<float> v = base(n);
    for (float& x : v) x *= x;
    return v;
  };
}

Tensor Call::operator[](std::string_view name) const {
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i].name == name) return tensors.at(i);
  throw Error(cat("op case: no argument named '", name, "'"));
}

const std::vector<float>& Results::operator[](std::string_view name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return values.at(i);
  throw Error(cat("op case: no compared argument named '", name, "'"));
}

DType storage_dtype(Kind k, DType x) {
  switch (k) {
    case Kind::kX:
      return x;
    case Kind::kF32:
      return DType::kF32;
    case Kind::kBF16:
      return DType::kBF16;
    case Kind::kF16:
      return DType::kF16;
    case Kind::kI32:
      return DType::kI32;
    case Kind::kU8:
      return DType::kU8;
  }
  return DType::kF32;
}

}  // namespace zt::backend::ops
