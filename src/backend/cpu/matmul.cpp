// Matmul with optional bias (GPT-2's Conv1D layers and the tied LM head), forward and backward, every
// product a thread-split OpenBLAS sgemm (gemm.cpp). Bias gradients are column sums, one strip per thread.
// The fused ops CUDA runs as cuBLASLt epilogues (matmul + GELU, the GELU-gradient matmul with the bias
// gradient) are here the unfused chains, op for op: their definition and the CUDA twins' reference.
// In mixed precision the X operands are widened into fp32 scratch (scratch.hpp gives the cost), the same
// sgemm path runs, and X outputs are rounded once; dweight and dbias accumulate in f32 directly.
#include <vector>

#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/partition.hpp"
#include "backend/cpu/precision.hpp"
#include "backend/cpu/scratch.hpp"

namespace zt::backend::cpu {
namespace {

using Dims = MatmulDims;
// y = x @ W (+ b): the bias is written into y first and the product added onto it (beta = 1).
void forward_f32(float* y, const float* x, const float* w, const float* b, const Dims& d, bool in_out, int threads) {
  if (b != nullptr) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t n = 0; n < d.n; ++n) {
      float* yr = y + n * d.oc;
#pragma omp simd
      for (std::int64_t c = 0; c < d.oc; ++c) yr[c] = b[c];
    }
  }
  Gemm g;
  g.trans_b = !in_out;
  g.m = d.n, g.n = d.oc, g.k = d.ic;
  g.a = x, g.lda = d.ic;
  g.b = w, g.ldb = in_out ? d.oc : d.ic;
  g.beta = b == nullptr ? 0.0f : 1.0f;
  g.c = y, g.ldc = d.oc;
  gemm_parallel(g, threads);
}

// dx = dy @ W^T (written; beta = 1: added).
void input_grad_f32(float* dx, const float* dy, const float* w, const Dims& d, bool in_out, int threads,
                    float beta = 0.0f) {
  Gemm g;
  g.beta = beta;
  g.trans_b = in_out;  // W [IC,OC] is read transposed; W [OC,IC] as it is
  g.m = d.n, g.n = d.ic, g.k = d.oc;
  g.a = dy, g.lda = d.oc;
  g.b = w, g.ldb = in_out ? d.oc : d.ic;
  g.c = dx, g.ldc = d.ic;
  gemm_parallel(g, threads);
}

// dw += x^T @ dy (kInOut) or dy^T @ x (kOutIn).
void weight_grad_f32(float* dw, const float* dy, const float* x, const Dims& d, bool in_out, int threads) {
  Gemm g;
  g.trans_a = true;
  g.m = in_out ? d.ic : d.oc, g.n = in_out ? d.oc : d.ic, g.k = d.n;
  g.a = in_out ? x : dy, g.lda = in_out ? d.ic : d.oc;
  g.b = in_out ? dy : x, g.ldb = in_out ? d.oc : d.ic;
  g.beta = 1.0f;
  g.c = dw, g.ldc = g.n;
  gemm_parallel(g, threads);
}

// dbias[c] += sum_n dout[n,c]: thread s owns column strip s and adds the rows in order. T: the storage
// type of dout (widened exactly on load, so an X dout gives the sums of its widened copy).
template <typename T>
void bias_grad(float* db, const T* dy, std::int64_t N, std::int64_t OC, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int s = 0; s < threads; ++s) {
    std::int64_t c0, c1;
    column_strip(OC, threads, s, c0, c1);
    if (c0 >= c1) continue;
    const std::int64_t width = c1 - c0;
    std::vector<float> acc(width, 0.0f);
    float* a = acc.data();
    for (std::int64_t n = 0; n < N; ++n) {
      const T* dr = dy + n * OC + c0;
#pragma omp simd
      for (std::int64_t j = 0; j < width; ++j) a[j] += load(dr[j]);
    }
    for (std::int64_t j = 0; j < width; ++j) db[c0 + j] += a[j];
  }
}

}  // namespace

// out = inp @ W + bias: kInOut multiplies by W [IC,OC], kOutIn by the transpose of W [OC,IC].
void CpuBackend::matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, WeightLayout layout) {
  const char* op = "matmul_forward";
  const Dims d = check_matmul_shapes(op, out, inp, weight, bias, layout);
  const DType x = compute_dtype(op, {{"out", out, Role::kCompute}, {"inp", inp, Role::kCompute},
                                     {"weight", weight, Role::kCompute}, {"bias", bias, Role::kCompute}});
  const bool in_out = layout == WeightLayout::kInOut;
  if (x == DType::kF32)
    return forward_f32(out.f32(op), inp.f32(op), weight.f32(op), bias.empty() ? nullptr : bias.f32(op), d, in_out,
                       threads_);
  // X: inp, weight and bias widened, out built in fp32 (bias added before the one rounding).
  ScratchParts parts(workspace(matmul_x_floats(d.n, d.ic, d.oc)));
  float* xf = parts.take(d.n * d.ic);
  float* wf = parts.take(d.ic * d.oc);
  float* yf = parts.take(d.n * d.oc);
  float* bf = bias.empty() ? nullptr : parts.take(d.oc);
  to_f32(xf, inp, threads_);
  to_f32(wf, weight, threads_);
  if (bf != nullptr) to_f32(bf, bias, threads_);
  forward_f32(yf, xf, wf, bf, d, in_out, threads_);
  from_f32(out, yf, threads_);
}

// dinp = dout @ W^T (written, skipped if empty); dweight += inp^T @ dout (kInOut) or dout^T @ inp
// (kOutIn), skipped if empty (a frozen weight); dbias += column sums of dout (skipped if empty).
void CpuBackend::matmul_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                                 WeightLayout layout) {
  const char* op = "matmul_backward";
  const Dims d = check_matmul_shapes(op, dout, inp, weight, dbias, layout);
  if (!dweight.empty()) expect_shape(op, "dweight", dweight, {weight.dim(0), weight.dim(1)});
  if (!dinp.empty()) expect_rows(op, "dinp", dinp, d.n, d.ic);
  const DType x = compute_dtype(op, {{"dinp", dinp, Role::kCompute}, {"dout", dout, Role::kCompute},
                                     {"inp", inp, Role::kCompute}, {"weight", weight, Role::kCompute},
                                     {"dweight", dweight, Role::kF32}, {"dbias", dbias, Role::kF32}});
  const bool in_out = layout == WeightLayout::kInOut;
  float* dw = dweight.empty() ? nullptr : dweight.f32(op);
  float* db = dbias.empty() ? nullptr : dbias.f32(op);
  if (x == DType::kF32) {
    const float* dy = dout.f32(op);
    if (!dinp.empty()) input_grad_f32(dinp.f32(op), dy, weight.f32(op), d, in_out, threads_);
    if (dw != nullptr) weight_grad_f32(dw, dy, inp.f32(op), d, in_out, threads_);
    if (db != nullptr) bias_grad(db, dy, d.n, d.oc, threads_);
    return;
  }
  // X: dout widened once; the [N,IC] part holds fp32 dinp first, then the widened inp for dweight.
  ScratchParts parts(workspace(matmul_x_floats(d.n, d.ic, d.oc)));
  float* dyf = parts.take(d.n * d.oc);
  float* wf = parts.take(d.ic * d.oc);
  float* nic = parts.take(d.n * d.ic);
  to_f32(dyf, dout, threads_);
  if (!dinp.empty()) {
    to_f32(wf, weight, threads_);
    input_grad_f32(nic, dyf, wf, d, in_out, threads_);
    from_f32(dinp, nic, threads_);
  }
  if (dw != nullptr) {
    to_f32(nic, inp, threads_);
    weight_grad_f32(dw, dyf, nic, d, in_out, threads_);
  }
  if (db != nullptr) bias_grad(db, dyf, d.n, d.oc, threads_);
}

// dinp (f32) += dout @ W^T: the X operands widened as matmul_backward widens them, the sgemm adding
// into dinp (beta = 1), so nothing is rounded to X.
void CpuBackend::matmul_backward_input_accumulate(Tensor dinp, Tensor dout, Tensor weight, WeightLayout layout) {
  const char* op = "matmul_backward_input_accumulate";
  const Dims d = check_matmul_input_grad_shapes(op, dinp, dout, weight, layout);
  const bool in_out = layout == WeightLayout::kInOut;
  const DType x = compute_dtype(op, {{"dout", dout, Role::kCompute}, {"weight", weight, Role::kCompute},
                                     {"dinp", dinp, Role::kF32}});
  if (x == DType::kF32)
    return input_grad_f32(dinp.f32(op), dout.f32(op), weight.f32(op), d, in_out, threads_, 1.0f);
  ScratchParts parts(workspace(matmul_x_floats(d.n, d.ic, d.oc)));
  float* dyf = parts.take(d.n * d.oc);
  float* wf = parts.take(d.ic * d.oc);
  to_f32(dyf, dout, threads_);
  to_f32(wf, weight, threads_);
  input_grad_f32(dinp.f32(op), dyf, wf, d, in_out, threads_, 1.0f);
}

// The definition: the two ops in turn (the CPU gains nothing from the fusion; CUDA's epilogue saves
// writing and reading pre and a kernel).
void CpuBackend::matmul_gelu_forward(Tensor out, Tensor pre, Tensor inp, Tensor weight, Tensor bias,
                                     WeightLayout layout) {
  ZT_CHECK(out.data != pre.data || out.numel() == 0,
           "matmul_gelu_forward: out must not alias pre (the backward needs pre)");
  matmul_forward(pre, inp, weight, bias, layout);
  gelu_forward(out, pre);
}

// dpre = dout @ W^T, then * gelu'(pre) in place, then dbias_pre += its column sums: the unfused chain's
// values (matmul_backward into the GELU output's gradient, gelu_backward, and the next matmul_backward's
// bias sums of dpre), in the same order.
void CpuBackend::matmul_dgelu_backward(Tensor dpre, Tensor dbias_pre, Tensor dout, Tensor weight, Tensor pre,
                                       WeightLayout layout) {
  const char* op = "matmul_dgelu_backward";
  const Dims d = check_matmul_shapes(op, dout, pre, weight, Tensor(), layout);
  expect_rows(op, "dpre", dpre, d.n, d.ic);
  if (!dbias_pre.empty()) expect_shape(op, "dbias_pre", dbias_pre, {d.ic});
  const DType x = compute_dtype(op, {{"dpre", dpre, Role::kCompute}, {"dout", dout, Role::kCompute},
                                     {"pre", pre, Role::kCompute}, {"weight", weight, Role::kCompute},
                                     {"dbias_pre", dbias_pre, Role::kF32}});
  ZT_CHECK(dpre.data != dout.data, op, ": dpre must not alias dout (the GEMM reads dout while writing dpre)");
  matmul_backward(dpre, Tensor(), Tensor(), dout, pre, weight, layout);
  gelu_backward(dpre, pre, dpre);
  if (dbias_pre.empty()) return;
  with_storage(x, [&](auto tag) {
    bias_grad(dbias_pre.f32(op), data_as<decltype(tag)>(dpre), d.n, d.ic, threads_);
  });
}

}  // namespace zt::backend::cpu
