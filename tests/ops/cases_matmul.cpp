// Op cases: matmul (+bias) forward and backward in both weight layouts: kInOut layers (c_attn-like, odd
// OC) and the tied LM head (kOutIn [Vp, C], no bias), N below and above the 128-row column-sum chunk,
// a frozen weight (no dweight: LoRA's base), no dinp (the first layer's input), and operands at element
// offsets below cuBLASLt's alignment assumptions.
#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

struct Matmul {
  std::int64_t n, ic, oc;
  WeightLayout layout;
  bool bias = true, dinp = true, dweight = true;
  std::int64_t offset = 0;  // every operand this many elements into its allocation
  std::uint32_t seed = 20;
};

OpCase matmul(const Matmul& m) {
  const bool in_out = m.layout == WeightLayout::kInOut;
  const Dims wdims = in_out ? Dims{m.ic, m.oc} : Dims{m.oc, m.ic};
  const std::uint32_t s = m.seed;
  OpCase c{
      .name =
          cat("matmul N=", m.n, " IC=", m.ic, " OC=", m.oc, in_out ? " [IC,OC]" : " [OC,IC]", m.bias ? " bias" : "",
              m.dinp ? "" : " no dinp", m.dweight ? "" : " no dweight", m.offset ? cat(" at element ", m.offset) : ""),
      .args = {in("x", {m.n, m.ic}, normal(s)), in("weight", wdims, normal(s + 1, 0.1f)), out("out", {m.n, m.oc}),
               in("dout", {m.n, m.oc}, normal(s + 3))},
      .forward =
          [m](Call& c) { c.be.matmul_forward(c["out"], c["x"], c["weight"], m.bias ? c["bias"] : Tensor(), m.layout); },
      .backward =
          [m](Call& c) {
            c.be.matmul_backward(m.dinp ? c["dinp"] : Tensor(), m.dweight ? c["dweight"] : Tensor(),
                                 m.bias ? c["dbias"] : Tensor(), c["dout"], c["x"], c["weight"], m.layout);
          },
      .fd = FiniteDiff{{{"out", "dout"}}, {}}};
  // dweight and dbias are fp32 GEMM and column-sum outputs of identical inputs (accumulated onto s+4, s+5).
  auto add = [&c](Arg a, const char* input) {
    if (input != nullptr) c.fd->grads.push_back({a.name, input});
    c.args.push_back(std::move(a));
  };
  if (m.bias) add(in("bias", {m.oc}, normal(s + 2)), nullptr);
  if (m.dinp) add(out("dinp", {m.n, m.ic}).bwd(), "x");
  if (m.dweight) add(grad("dweight", wdims, normal(s + 4)).tolerance(kSumTol), "weight");
  if (m.bias) add(grad("dbias", {m.oc}, normal(s + 5)).tolerance(kSumTol), "bias");
  for (Arg& a : c.args) a.offset = m.offset;
  return c;
}

}  // namespace

std::vector<OpCase> matmul_cases() {
  using L = WeightLayout;
  std::vector<OpCase> cases;
  for (const Matmul& m :
       {Matmul{7, 96, 101, L::kInOut}, Matmul{300, 96, 288, L::kInOut}, Matmul{7, 96, 128, L::kOutIn, false},
        Matmul{300, 33, 50, L::kOutIn, true, false}, Matmul{5, 64, 40, L::kInOut, false, false}})
    cases.push_back(matmul(m));
  for (const L layout : {L::kInOut, L::kOutIn}) {
    // A frozen weight (LoRA's base): the same dinp and dbias without dweight.
    cases.push_back(matmul({.n = 37, .ic = 64, .oc = 96, .layout = layout, .dweight = false, .seed = 30}));
    // 8 elements (16 bytes in bf16/f16) is below cuBLASLt's default 256-byte assumption, so it must be
    // told the real alignment; 1 element is below the 16 bytes the bias epilogue's kernels may load at
    // once, so the bias must be staged (a misaligned-address fault otherwise).
    for (const std::int64_t offset : {1, 8})
      cases.push_back(matmul({.n = 9, .ic = 40, .oc = 24, .layout = layout, .offset = offset, .seed = 30}));
    // Finite differences on the CPU: one row and a few.
    for (const std::int64_t n : {1, 7}) {
      OpCase small = matmul({.n = n, .ic = 5, .oc = 3, .layout = layout, .seed = 1});
      small.where = Where::kCpuOnly;
      cases.push_back(std::move(small));
    }
  }
  return cases;
}

}  // namespace zt::backend::ops
