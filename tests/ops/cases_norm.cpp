// Op cases: LayerNorm (GPT-2), RMSNorm and its fusions with the residual stream (Llama), RMSNorm of
// attention heads (Qwen3), forward and backward. N=300 rows span three 128-row chunks of the column sums;
// C=33 leaves a partial warp and strip. Parameter gradients start non-zero (the += rule).
#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

// The backward reads the reference's mean and rstd, so only the backward kernels are compared.
OpCase layernorm(std::int64_t N, std::int64_t C) {
  return {.name = cat("layernorm N=", N, " C=", C),
          .args = {in("x", {N, C}, normal(10, 2.0f)), in("weight", {C}, normal(11)), in("bias", {C}, normal(12)),
                   out("out", {N, C}), out("mean", {N}, Kind::kF32).tolerance(kSumTol),
                   out("rstd", {N}, Kind::kF32).tolerance(kSumTol), in("dout", {N, C}, normal(13)),
                   out("dinp", {N, C}).bwd(), grad("dweight", {C}, normal(14)),
                   grad("dbias", {C}, normal(15)).tolerance(kSumTol)},  // sums of identical dout values
          .forward =
              [](Call& c) { c.be.layernorm_forward(c["out"], c["mean"], c["rstd"], c["x"], c["weight"], c["bias"]); },
          .backward =
              [](Call& c) {
                c.be.layernorm_backward(c["dinp"], c["dweight"], c["dbias"], c["dout"], c["x"], c["weight"], c["mean"],
                                        c["rstd"]);
              },
          .fd = FiniteDiff{{{"out", "dout"}}, {{"dinp", "x"}, {"dweight", "weight"}, {"dbias", "bias"}}}};
}

// RMSNorm forward then backward on the backend's own rstd (as in training).
OpCase rmsnorm(std::int64_t N, std::int64_t C) {
  return {
      .name = cat("rmsnorm N=", N, " C=", C),
      .args = {in("x", {N, C}, normal(10, 2.0f)), in("weight", {C}, normal(11)), out("out", {N, C}),
               out("rstd", {N}, Kind::kF32), in("dout", {N, C}, normal(13)), out("dinp", {N, C}).bwd(),
               grad("dweight", {C}, normal(14))},
      .forward = [](Call& c) { c.be.rmsnorm_forward(c["out"], c["rstd"], c["x"], c["weight"], 1e-5f); },
      .backward =
          [](Call& c) { c.be.rmsnorm_backward(c["dinp"], c["dweight"], c["dout"], c["x"], c["weight"], c["rstd"]); },
      .backward_reads = BackwardReads::kOwnForward,
      .fd = FiniteDiff{{{"out", "dout"}}, {{"dinp", "x"}, {"dweight", "weight"}}}};
}

// dinp written over dout (backend.hpp allows it; the column sums are queued first).
OpCase rmsnorm_backward_in_place() {
  return {
      .name = "rmsnorm backward in place N=130 C=64",
      .args = {in("x", {130, 64}, normal(15)), in("weight", {64}, normal(16)), out("out", {130, 64}),
               out("rstd", {130}, Kind::kF32), inout("dout", {130, 64}, normal(17)).bwd(),
               grad("dweight", {64}, normal(18))},
      .forward = [](Call& c) { c.be.rmsnorm_forward(c["out"], c["rstd"], c["x"], c["weight"], 1e-6f); },
      .backward =
          [](Call& c) { c.be.rmsnorm_backward(c["dout"], c["dweight"], c["dout"], c["x"], c["weight"], c["rstd"]); },
      .backward_reads = BackwardReads::kOwnForward};
}

// Llama's block fusions: res = a + b with the norm after it (res written over a, as the model may), and
// the input gradient added into a non-zero residual gradient.
OpCase add_rmsnorm(std::int64_t N, std::int64_t C) {
  return {
      .name = cat("add_rmsnorm_forward, rmsnorm_backward_accumulate N=", N, " C=", C),
      .args = {inout("a", {N, C}, normal(50, 2.0f)), in("b", {N, C}, normal(51)), in("weight", {C}, normal(52)),
               out("out", {N, C}), out("rstd", {N}, Kind::kF32), in("dout", {N, C}, normal(53)),
               grad("dres", {N, C}, normal(54), Kind::kX), grad("dweight", {C}, normal(55))},
      .forward =
          [](Call& c) { c.be.add_rmsnorm_forward(c["a"], c["out"], c["rstd"], c["a"], c["b"], c["weight"], 1e-5f); },
      .backward =
          [](Call& c) {
            c.be.rmsnorm_backward_accumulate(c["dres"], c["dweight"], c["dout"], c["a"], c["weight"], c["rstd"]);
          },
      .backward_reads = BackwardReads::kOwnForward,
      .fd = FiniteDiff{{{"out", "dout"}}, {{"dres", "a"}, {"dweight", "weight"}}}};
}

// Qwen3's q_norm and k_norm: RMSNorm of heads [first, first + n) of hs columns inside rows of W = 5 heads
// (q heads, then k, then v as in a q|k|v row), each with the shared weight [hs]; the other columns of
// out are never written (out starts as the input, in place), and the backward writes d(those heads)
// over dout in place, leaving the v columns of dout as they were.
OpCase head_rmsnorm(std::int64_t N, std::int64_t hs, int first, int n) {
  const std::int64_t W = 5 * hs;
  return {
      .name = cat("head_rmsnorm N=", N, " hs=", hs, " heads [", first, ", ", first + n, ") of 5, in place"),
      .args = {in("x", {N, W}, normal(56, 2.0f)), in("weight", {hs}, normal(57)), inout("y", {N, W}, normal(56, 2.0f)),
               out("rstd", {N, n}, Kind::kF32), inout("dy", {N, W}, normal(58)).bwd(), grad("dweight", {hs}, normal(59))},
      .forward =
          [first, n](Call& c) { c.be.head_rmsnorm_forward(c["y"], c["rstd"], c["y"], c["weight"], first, n, 1e-6f); },
      .backward =
          [first, n](Call& c) {
            c.be.head_rmsnorm_backward(c["dy"], c["dweight"], c["dy"], c["x"], c["weight"], c["rstd"], first, n);
          },
      .backward_reads = BackwardReads::kOwnForward};
}

// The same out of place for finite differences (the op's gradient of its heads; the others pass through).
OpCase head_rmsnorm_fd() {
  const std::int64_t N = 3, hs = 8, W = 4 * hs;
  return {.name = "head_rmsnorm N=3 hs=8 heads [1, 3) of 4",
          .args = {in("x", {N, W}, normal(60, 2.0f)), in("weight", {hs}, normal(61)), inout("y", {N, W}, filled(0.0f)),
                   out("rstd", {N, 2}, Kind::kF32), in("dy", {N, W}, normal(62)), inout("dx", {N, W}, filled(0.0f)).bwd(),
                   grad("dweight", {hs}, normal(63))},
          .forward = [](Call& c) { c.be.head_rmsnorm_forward(c["y"], c["rstd"], c["x"], c["weight"], 1, 2, 1e-5f); },
          .backward =
              [](Call& c) {
                c.be.head_rmsnorm_backward(c["dx"], c["dweight"], c["dy"], c["x"], c["weight"], c["rstd"], 1, 2);
              },
          .fd = FiniteDiff{{{"y", "dy"}}, {{"dx", "x"}, {"dweight", "weight"}}}};
}

OpCase on_cpu(OpCase c) {
  c.where = Where::kCpuOnly;
  return c;
}

}  // namespace

std::vector<OpCase> norm_cases() {
  std::vector<OpCase> cases;
  for (auto [N, C] : {std::pair<std::int64_t, std::int64_t>{7, 96}, {300, 33}}) {
    cases.push_back(layernorm(N, C));
    cases.push_back(rmsnorm(N, C));
  }
  cases.push_back(rmsnorm_backward_in_place());
  cases.push_back(add_rmsnorm(300, 96));
  cases.push_back(head_rmsnorm(37, 64, 0, 3));   // q heads
  cases.push_back(head_rmsnorm(37, 128, 3, 1));  // a k head after them
  cases.push_back(head_rmsnorm(300, 40, 1, 3));  // 900 head rows: several column-sum chunks; hs not 32's multiple
  // 150,000 head rows (tokens x heads): past 128 x 1024, the column sums' chunks grow beyond 128 rows.
  cases.push_back(head_rmsnorm(50000, 16, 0, 3));
  cases.push_back(on_cpu(head_rmsnorm_fd()));
  // Finite differences on small shapes: odd C, and C wider than one 64-column strip.
  cases.push_back(on_cpu(layernorm(7, 5)));
  cases.push_back(on_cpu(layernorm(7, 129)));
  cases.push_back(on_cpu(rmsnorm(4, 19)));
  cases.push_back(on_cpu(add_rmsnorm(5, 19)));
  return cases;
}

}  // namespace zt::backend::ops
