// Op cases: the residual add (its output over either input), accumulate (also f32 += bf16/f16: ZeRO's
// slices reduced in the compute dtype), scale, fill_zero, views one
// element past a 16-byte boundary (the scalar loop of the packed kernels, vector_map.cuh), and cast in
// every direction between f32, bf16 and f16, exactly (one rounding to nearest even). n = 1037 is not a
// multiple of 256.
#include <limits>

#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

constexpr std::int64_t kN = 1000 + 37;

OpCase add() {
  return {.name = cat("add n=", kN, ", out over a, out over b"),
          .args = {in("a", {kN}, normal(70)), in("b", {kN}, normal(71)), out("out", {kN}),
                   inout("a_then_sum", {kN}, normal(70)), inout("b_then_sum", {kN}, normal(71))},
          .forward = [](Call& c) {
            c.be.add(c["out"], c["a"], c["b"]);
            c.be.add(c["a_then_sum"], c["a_then_sum"], c["b"]);
            c.be.add(c["b_then_sum"], c["a"], c["b_then_sum"]);
          }};
}

OpCase accumulate_and_scale() {
  return {.name = cat("accumulate, scale, fill_zero n=", kN),
          .args = {in("src", {kN}, normal(71)), inout("dst", {kN}, normal(70)), inout("scaled", {kN}, normal(70)),
                   inout("zeroed", {kN}, normal(70)).matching(Match::kExact)},
          .forward = [](Call& c) {
            c.be.accumulate(c["dst"], c["src"]);
            c.be.scale(c["scaled"], 0.37f);
            c.be.fill_zero(c["zeroed"]);
          }};
}

// Inputs one element past an aligned start and an aligned output must not take the packed path either.
OpCase misaligned() {
  return {.name = cat("add and gelu on views one element off n=", kN),
          .args = {in("a", {kN}, normal(80)).at(1), in("b", {kN}, normal(81)).at(1), out("sum", {kN}),
                   out("gelu", {kN}).at(1)},
          .forward = [](Call& c) {
            c.be.add(c["sum"], c["a"], c["b"]);
            c.be.gelu_forward(c["gelu"], c["a"]);
          }};
}

Kind kind_of(DType t) { return t == DType::kBF16 ? Kind::kBF16 : t == DType::kF16 ? Kind::kF16 : Kind::kF32; }

// NaN, a value beyond f16 (inf), an f16 subnormal and -0 among N(0, 10^2) values.
OpCase cast(DType from, DType to) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return {.name = cat("cast ", dtype_name(from), " -> ", dtype_name(to), " n=", kN),
          .args = {in("src", {kN}, with_at(normal(80, 10.0f), {{0, nan}, {1, 1e6f}, {2, 1e-7f}, {3, -0.0f}}),
                      kind_of(from)),
                   out("dst", {kN}, kind_of(to)).matching(Match::kExact)},
          .forward = [](Call& c) { c.be.cast(c["dst"], c["src"]); },
          .dtypes = {DType::kF32}};
}

// f32 += a bf16/f16 source, widened exactly: one fp32 add per element, the same bits on every backend.
OpCase accumulate_widened(DType from) {
  return {.name = cat("accumulate f32 += ", dtype_name(from), " n=", kN),
          .args = {in("src", {kN}, normal(72), kind_of(from)),
                   inout("dst", {kN}, normal(73), Kind::kF32).matching(Match::kExact)},
          .forward = [](Call& c) { c.be.accumulate(c["dst"], c["src"]); },
          .dtypes = {DType::kF32}};
}

}  // namespace

std::vector<OpCase> elementwise_cases() {
  std::vector<OpCase> cases = {add(), accumulate_and_scale(), misaligned(), accumulate_widened(DType::kBF16),
                               accumulate_widened(DType::kF16)};
  for (const DType from : {DType::kF32, DType::kBF16, DType::kF16})
    for (const DType to : {DType::kF32, DType::kBF16, DType::kF16}) cases.push_back(cast(from, to));
  return cases;
}

}  // namespace zt::backend::ops
