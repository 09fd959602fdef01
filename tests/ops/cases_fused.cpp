// Op cases: the fused ops of GPT-2's block (backend.hpp): the residual add + LayerNorm and the LayerNorm
// backward added into the residual gradient; the MLP c_fc -> GELU -> c_proj with the GELU fused into the
// first GEMM forward and into the second's input gradient (with c_fc's bias gradient); and the input
// gradient accumulated in fp32 (the chunked LM head). Each runs as the chain the model runs, so the
// finite differences check the chain's gradients. N=300 spans three 128-row column-sum chunks; 33 leaves a
// partial warp.
#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

OpCase add_layernorm(std::int64_t N, std::int64_t C) {
  return {.name = cat("add_layernorm_forward, layernorm_backward_accumulate N=", N, " C=", C),
          .args = {inout("a", {N, C}, normal(60, 2.0f)), in("b", {N, C}, normal(61)), in("weight", {C}, normal(62)),
                   in("bias", {C}, normal(63)), out("out", {N, C}),
                   out("mean", {N}, Kind::kF32), out("rstd", {N}, Kind::kF32),  // of res rounded to X: X's tolerance
                   in("dout", {N, C}, normal(64)),
                   grad("dres", {N, C}, normal(65), Kind::kX), grad("dweight", {C}, normal(66)),
                   grad("dbias", {C}, normal(67)).tolerance(kSumTol)},
          .forward =
              [](Call& c) {
                c.be.add_layernorm_forward(c["a"], c["out"], c["mean"], c["rstd"], c["a"], c["b"], c["weight"],
                                           c["bias"]);
              },
          .backward =
              [](Call& c) {
                c.be.layernorm_backward_accumulate(c["dres"], c["dweight"], c["dbias"], c["dout"], c["a"],
                                                   c["weight"], c["mean"], c["rstd"]);
              },
          .backward_reads = BackwardReads::kOwnForward,
          .fd = FiniteDiff{{{"out", "dout"}}, {{"dres", "a"}, {"dweight", "weight"}, {"dbias", "bias"}}}};
}

// x [N,C] -> pre = x Wfc + bfc, act = gelu(pre) (matmul_gelu_forward) -> out = act Wproj + bproj; backward:
// Wproj's gradients (matmul_backward without dinp), dpre with bfc's gradient (matmul_dgelu_backward), then
// Wfc's and x's (matmul_backward without dbias). GPT-2's Conv1D layout [in, out].
OpCase gelu_mlp(std::int64_t N, std::int64_t C, std::int64_t F) {
  constexpr WeightLayout kInOut = WeightLayout::kInOut;
  return {.name = cat("matmul_gelu_forward, matmul_dgelu_backward MLP N=", N, " C=", C, " F=", F),
          .args = {in("x", {N, C}, normal(70)), in("w_fc", {C, F}, normal(71, 0.2f)), in("b_fc", {F}, normal(72)),
                   in("w_proj", {F, C}, normal(73, 0.2f)), in("b_proj", {C}, normal(74)), out("pre", {N, F}),
                   out("act", {N, F}), out("out", {N, C}), in("dout", {N, C}, normal(75)),
                   out("dpre", {N, F}).bwd(), out("dx", {N, C}).bwd(),
                   // dw_fc, db_fc: sums of dpre; dw_proj: of act (both X results, rounded on each side)
                   grad("dw_fc", {C, F}, normal(76)).tolerance(kSumOfXTol),
                   grad("db_fc", {F}, normal(77)).tolerance(kSumOfXTol),
                   grad("dw_proj", {F, C}, normal(78)).tolerance(kSumOfXTol),
                   grad("db_proj", {C}, normal(79)).tolerance(kSumTol)},
          .forward =
              [](Call& c) {
                c.be.matmul_gelu_forward(c["act"], c["pre"], c["x"], c["w_fc"], c["b_fc"], kInOut);
                c.be.matmul_forward(c["out"], c["act"], c["w_proj"], c["b_proj"], kInOut);
              },
          .backward =
              [](Call& c) {
                c.be.matmul_backward(Tensor(), c["dw_proj"], c["db_proj"], c["dout"], c["act"], c["w_proj"], kInOut);
                c.be.matmul_dgelu_backward(c["dpre"], c["db_fc"], c["dout"], c["w_proj"], c["pre"], kInOut);
                c.be.matmul_backward(c["dx"], c["dw_fc"], Tensor(), c["dpre"], c["x"], c["w_fc"], kInOut);
              },
          .backward_reads = BackwardReads::kOwnForward,
          .fd = FiniteDiff{{{"out", "dout"}},
                           {{"dx", "x"}, {"dw_fc", "w_fc"}, {"db_fc", "b_fc"}, {"dw_proj", "w_proj"}, {"db_proj", "b_proj"}}}};
}

// dinp (f32, non-zero) += dout @ W^T over a [V, C] head in the tied head's layout [OC, IC].
OpCase input_accumulate(std::int64_t N, std::int64_t C, std::int64_t V) {
  return {.name = cat("matmul_backward_input_accumulate N=", N, " C=", C, " V=", V),
          .args = {in("x", {N, C}, normal(80)), in("weight", {V, C}, normal(81, 0.2f)), out("out", {N, V}),
                   in("dout", {N, V}, normal(82)), grad("dinp", {N, C}, normal(83)).tolerance(kSumTol)},
          .forward = [](Call& c) { c.be.matmul_forward(c["out"], c["x"], c["weight"], Tensor(), WeightLayout::kOutIn); },
          .backward =
              [](Call& c) { c.be.matmul_backward_input_accumulate(c["dinp"], c["dout"], c["weight"], WeightLayout::kOutIn); },
          .fd = FiniteDiff{{{"out", "dout"}}, {{"dinp", "x"}}}};
}

}  // namespace

std::vector<OpCase> fused_cases() {
  return {add_layernorm(7, 40), add_layernorm(300, 33), gelu_mlp(3, 6, 10), gelu_mlp(130, 24, 96),
          input_accumulate(9, 24, 50)};
}

}  // namespace zt::backend::ops
