// Matmul with optional bias (GPT-2's Conv1D layers and the tied LM head), forward and backward, every
// product a thread-split OpenBLAS sgemm (gemm.cpp). Bias gradients are column sums, one strip per thread.
#include <vector>

#include "backend/cpu/checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/partition.hpp"

namespace zt::backend::cpu {
namespace {

struct Dims {
  std::int64_t n, ic, oc;
};

// inp [N,IC], weight [IC,OC] (kInOut) or [OC,IC] (kOutIn), out/dout [N,OC], bias [OC] or empty.
Dims check_matmul(const char* op, const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                  WeightLayout layout) {
  ZT_CHECK_EQ(weight.rank, 2, op, ": weight must be 2-D, got ", weight.shape_string());
  const bool in_out = layout == WeightLayout::kInOut;
  const Dims d{rows_of(inp), inp.dim(-1), in_out ? weight.dim(1) : weight.dim(0)};
  if ((in_out ? weight.dim(0) : weight.dim(1)) != d.ic)
    throw Error(cat(op, ": weight ", weight.shape_string(), " does not fit inp ", inp.shape_string(), " (layout ",
                    in_out ? "[IC,OC]" : "[OC,IC]", ")"));
  expect_rows(op, "out", out, d.n, d.oc);
  if (!bias.empty()) expect_shape(op, "bias", bias, {d.oc});
  return d;
}

// dbias[c] += sum_n dout[n,c]: thread s owns column strip s and adds the rows in order.
void bias_grad(float* db, const float* dy, std::int64_t N, std::int64_t OC, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int s = 0; s < threads; ++s) {
    std::int64_t c0, c1;
    column_strip(OC, threads, s, c0, c1);
    if (c0 >= c1) continue;
    const std::int64_t width = c1 - c0;
    std::vector<float> acc(width, 0.0f);
    float* a = acc.data();
    for (std::int64_t n = 0; n < N; ++n) {
      const float* dr = dy + n * OC + c0;
#pragma omp simd
      for (std::int64_t j = 0; j < width; ++j) a[j] += dr[j];
    }
    for (std::int64_t j = 0; j < width; ++j) db[c0 + j] += a[j];
  }
}

}  // namespace

// out = inp @ W + bias: kInOut multiplies by W [IC,OC], kOutIn by the transpose of W [OC,IC].
// The bias is written into out first and the product added onto it (beta = 1).
void CpuBackend::matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, WeightLayout layout) {
  const char* op = "matmul_forward";
  const Dims d = check_matmul(op, out, inp, weight, bias, layout);
  float* y = out.f32(op);
  const bool in_out = layout == WeightLayout::kInOut;
  if (!bias.empty()) {
    const float* b = bias.f32(op);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t n = 0; n < d.n; ++n) {
      float* yr = y + n * d.oc;
#pragma omp simd
      for (std::int64_t c = 0; c < d.oc; ++c) yr[c] = b[c];
    }
  }
  Gemm g;
  g.trans_b = !in_out;
  g.m = d.n, g.n = d.oc, g.k = d.ic;
  g.a = inp.f32(op), g.lda = d.ic;
  g.b = weight.f32(op), g.ldb = in_out ? d.oc : d.ic;
  g.beta = bias.empty() ? 0.0f : 1.0f;
  g.c = y, g.ldc = d.oc;
  gemm_parallel(g, threads_);
}

// dinp = dout @ W^T (written, skipped if empty); dweight += inp^T @ dout (kInOut) or dout^T @ inp
// (kOutIn); dbias += column sums of dout (skipped if empty).
void CpuBackend::matmul_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                                 WeightLayout layout) {
  const char* op = "matmul_backward";
  const Dims d = check_matmul(op, dout, inp, weight, dbias, layout);
  expect_shape(op, "dweight", dweight, {weight.dim(0), weight.dim(1)});
  const bool in_out = layout == WeightLayout::kInOut;
  const float* dy = dout.f32(op);
  const float* x = inp.f32(op);
  if (!dinp.empty()) {
    expect_rows(op, "dinp", dinp, d.n, d.ic);
    Gemm g;
    g.trans_b = in_out;  // W [IC,OC] is read transposed; W [OC,IC] as it is
    g.m = d.n, g.n = d.ic, g.k = d.oc;
    g.a = dy, g.lda = d.oc;
    g.b = weight.f32(op), g.ldb = in_out ? d.oc : d.ic;
    g.c = dinp.f32(op), g.ldc = d.ic;
    gemm_parallel(g, threads_);
  }
  Gemm g;
  g.trans_a = true;
  g.m = in_out ? d.ic : d.oc, g.n = in_out ? d.oc : d.ic, g.k = d.n;
  g.a = in_out ? x : dy, g.lda = in_out ? d.ic : d.oc;
  g.b = in_out ? dy : x, g.ldb = in_out ? d.oc : d.ic;
  g.beta = 1.0f;
  g.c = dweight.f32(op), g.ldc = g.n;
  gemm_parallel(g, threads_);
  if (!dbias.empty()) bias_grad(dbias.f32(op), dy, d.n, d.oc, threads_);
}

}  // namespace zt::backend::cpu
