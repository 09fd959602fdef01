// Op cases: GELU (tanh form) and SwiGLU forward and backward, and LoRA's dropout. n = 1037 is not a
// multiple of 256; the GELU input reaches -12, where e^{-2u} overflows fp32 and only a clamp keeps the
// backward finite.
#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

constexpr std::int64_t kN = 1000 + 37;

// The backward written over dout (backend.hpp allows it).
OpCase gelu_in_place(std::int64_t n, Values x) {
  const Dims dims = {n};
  return {.name = cat("gelu n=", n, ", backward in place"),
          .args = {in("x", dims, std::move(x)), out("out", dims), inout("dout", dims, normal(61)).bwd()},
          .forward = [](Call& c) { c.be.gelu_forward(c["out"], c["x"]); },
          .backward = [](Call& c) { c.be.gelu_backward(c["dout"], c["x"], c["dout"]); },
          .fd = FiniteDiff{{{"out", "dout"}}, {{"dout", "x"}}}};
}

// Both backward forms on the CPU: by finite differences, and in place giving the out-of-place bits.
OpCase gelu_small() {
  const Dims d = {3, 7};
  return {.name = "gelu 3x7 backward out of place and in place",
          .args = {in("x", d, normal(1, 2.0f)), out("out", d), in("dout", d, normal(2)), out("dinp", d).bwd(),
                   inout("dout_in_place", d, normal(2)).bwd()},
          .forward = [](Call& c) { c.be.gelu_forward(c["out"], c["x"]); },
          .backward =
              [](Call& c) {
                c.be.gelu_backward(c["dinp"], c["x"], c["dout"]);
                c.be.gelu_backward(c["dout_in_place"], c["x"], c["dout_in_place"]);
              },
          .where = Where::kCpuOnly,
          .fd = FiniteDiff{{{"out", "dout"}}, {{"dinp", "x"}}},
          .also = same_values("dinp", "dout_in_place")};
}

// inp [N, 2F] as (gate | up), out [N, F].
OpCase swiglu(std::int64_t N, std::int64_t F, std::uint32_t seed, float sd) {
  return {.name = cat("swiglu N=", N, " F=", F),
          .args = {in("inp", {N, 2 * F}, normal(seed, sd)), out("out", {N, F}), in("dout", {N, F}, normal(seed + 1)),
                   out("dinp", {N, 2 * F}).bwd()},
          .forward = [](Call& c) { c.be.swiglu_forward(c["out"], c["inp"]); },
          .backward = [](Call& c) { c.be.swiglu_backward(c["dinp"], c["inp"], c["dout"]); },
          .fd = FiniteDiff{{{"out", "dout"}}, {{"dinp", "inp"}}}};
}

// The GPU's Philox mask is the CPU's bit for bit (the same elements zero), the kept values scaled by
// 1/(1-p) within the dtype's rounding; in place the same mask; a counter offset past 2^32.
OpCase dropout(std::uint64_t first) {
  return {.name = cat("dropout n=", kN, " p=0.3 first=", first, ", then in place"),
          .args = {inout("x", {kN}, normal(70)), out("out", {kN}).matching(Match::kSameZeros)},
          .forward =
              [first](Call& c) {
                c.be.dropout(c["out"], c["x"], 0.3f, 1234, 99, first);
                c.be.dropout(c["x"], c["x"], 0.3f, 1234, 99, first);
              },
          .also = same_values("out", "x")};
}

// A column block of a wider matrix (a TP rank's input columns, row_stride the whole width).
OpCase dropout_block() {
  const std::int64_t rows = 129, block = 40, stride = 3 * block;
  return {.name = "dropout 129 rows of a 40-column block of 120 columns",
          .args = {in("x", {rows, block}, normal(71)), out("out", {rows, block}).matching(Match::kSameZeros)},
          .forward = [](Call& c) { c.be.dropout(c["out"], c["x"], 0.3f, 1234, 99, 7 + block, stride); },
          .dtypes = {DType::kF32}};
}

}  // namespace

std::vector<OpCase> activation_cases() {
  std::vector<OpCase> cases;
  cases.push_back(gelu_in_place(kN, with_at(normal(60, 3.0f), {{0, -12.0f}, {1, 9.0f}})));
  cases.push_back(gelu_small());
  cases.push_back(swiglu(7, 77, 30, 3.0f));
  OpCase small = swiglu(3, 11, 1, 2.0f);
  small.where = Where::kCpuOnly;
  cases.push_back(std::move(small));
  cases.push_back(dropout(0));
  cases.push_back(dropout((std::uint64_t{1} << 32) - 5));
  OpCase block = dropout_block();
  block.args[1].tol = tol_all(1e-6);
  cases.push_back(std::move(block));
  return cases;
}

}  // namespace zt::backend::ops
