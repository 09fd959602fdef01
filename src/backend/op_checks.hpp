// What every backend checks and computes the same way before any arithmetic: shape checks (failing with
// the op, the argument and both shapes named: the same message for the same mistake on either backend),
// the shapes of the matmul and LayerNorm ops, and AdamW's per-step scalars.
#pragma once

#include <cstdint>

#include <cmath>

#include "backend/backend.hpp"
#include "backend/tensor.hpp"

namespace zt::backend {

// Rows of a tensor read as [rows, last dim] (a [B,T,C] activation is N = B*T rows of C).
inline std::int64_t rows_of(const Tensor& t) { return t.rank == 0 ? 0 : t.numel() / t.dim(-1); }

// t must have exactly these dims.
inline void expect_shape(const char* op, const char* arg, const Tensor& t, std::initializer_list<std::int64_t> dims) {
  Tensor want(nullptr, t.dtype, dims);
  bool same = want.rank == t.rank;
  for (int i = 0; same && i < t.rank; ++i) same = want.shape[i] == t.shape[i];
  if (!same) throw Error(cat(op, ": ", arg, " has shape ", t.shape_string(), ", expected ", want.shape_string()));
}

// t must hold `rows` rows of `cols` (any leading dims whose product is rows).
inline void expect_rows(const char* op, const char* arg, const Tensor& t, std::int64_t rows, std::int64_t cols) {
  if (t.rank == 0 || t.dim(-1) != cols || rows_of(t) != rows)
    throw Error(cat(op, ": ", arg, " has shape ", t.shape_string(), ", expected ", rows, " rows of ", cols));
}

inline void expect_same_numel(const char* op, const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel())
    throw Error(cat(op, ": shapes ", a.shape_string(), " and ", b.shape_string(), " differ in size"));
}

// matmul: inp [N,IC], weight [IC,OC] (kInOut) or [OC,IC] (kOutIn), out/dout [N,OC], bias [OC] or empty.
struct MatmulDims {
  std::int64_t n, ic, oc;
};
inline MatmulDims check_matmul_shapes(const char* op, const Tensor& out, const Tensor& inp, const Tensor& weight,
                                      const Tensor& bias, WeightLayout layout) {
  ZT_CHECK_EQ(weight.rank, 2, op, ": weight must be 2-D, got ", weight.shape_string());
  const bool in_out = layout == WeightLayout::kInOut;
  const MatmulDims d{rows_of(inp), inp.dim(-1), in_out ? weight.dim(1) : weight.dim(0)};
  if ((in_out ? weight.dim(0) : weight.dim(1)) != d.ic)
    throw Error(cat(op, ": weight ", weight.shape_string(), " does not fit inp ", inp.shape_string(), " (layout ",
                    in_out ? "[IC,OC]" : "[OC,IC]", ")"));
  expect_rows(op, "out", out, d.n, d.oc);
  if (!bias.empty()) expect_shape(op, "bias", bias, {d.oc});
  return d;
}

// layernorm: x, y [N,C]; mean, rstd [N]; weight [C].
inline void check_layernorm_shapes(const char* op, const Tensor& x, const Tensor& y, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& weight) {
  const std::int64_t C = x.dim(-1), N = rows_of(x);
  expect_rows(op, "output", y, N, C);
  expect_shape(op, "weight", weight, {C});
  ZT_CHECK_EQ(mean.numel(), N, op, ": mean needs one value per row of ", x.shape_string());
  ZT_CHECK_EQ(rstd.numel(), N, op, ": rstd needs one value per row of ", x.shape_string());
}

// embedding_forward: tokens [B,T], out [B,T,C], wte [Vp,C], wpe [maxT,C] with T <= maxT.
inline void check_embedding_shapes(const char* op, const Tensor& out, const Tensor& tokens, const Tensor& wte,
                                   const Tensor& wpe) {
  ZT_CHECK_EQ(tokens.rank, 2, op, ": tokens must be [B,T], got ", tokens.shape_string());
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(-1);
  expect_shape(op, "out", out, {B, T, C});
  ZT_CHECK_EQ(wte.rank, 2, op, ": wte must be [Vp,C]");
  ZT_CHECK_EQ(wpe.rank, 2, op, ": wpe must be [maxT,C]");
  ZT_CHECK_EQ(wpe.dim(1), C, op, ": wpe and wte widths differ");
  ZT_CHECK_LE(T, wpe.dim(0), op, ": sequence longer than the position table");
}

// AdamW's scalars for one step, in double as PyTorch computes them in Python, then used as float (its
// opmath type), so both backends' kernels do the same float arithmetic:
//   g = grad * grad_scale;  p *= decay;  m = b1 m + one_b1 g;  v = b2 v + one_b2 g^2;
//   p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
struct AdamScalars {
  float step_size, bc2_sqrt, decay, b1, b2, one_b1, one_b2, eps, grad_scale;
};
inline AdamScalars adamw_scalars(const Backend::AdamW& hp) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), hp.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), hp.step);
  return {static_cast<float>(hp.lr / bc1), static_cast<float>(std::sqrt(bc2)),
          static_cast<float>(1.0 - static_cast<double>(hp.lr) * hp.weight_decay), hp.beta1, hp.beta2,
          static_cast<float>(1.0 - hp.beta1), static_cast<float>(1.0 - hp.beta2), hp.eps, hp.grad_scale};
}

}  // namespace zt::backend
