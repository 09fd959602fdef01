// Op cases: LayerNorm (GPT-2), RMSNorm and its fusions with the residual stream (Llama), forward and
// backward. N=300 rows span three 128-row chunks of the column sums; C=33 leaves a partial warp and
// strip. Parameter gradients start non-zero (the += rule).
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
  // Finite differences on small shapes: odd C, and C wider than one 64-column strip.
  cases.push_back(on_cpu(layernorm(7, 5)));
  cases.push_back(on_cpu(layernorm(7, 129)));
  cases.push_back(on_cpu(rmsnorm(4, 19)));
  cases.push_back(on_cpu(add_rmsnorm(5, 19)));
  return cases;
}

}  // namespace zt::backend::ops
