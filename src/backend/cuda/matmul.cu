// Matmul with optional bias (GPT-2's Conv1D layers and the tied LM head) on the GPU, forward and
// backward, every product one cuBLASLt GEMM (lt_matmul.hpp) with fp32 accumulation. What can ride in a
// GEMM's epilogue does: the bias, GPT-2's GELU after c_fc (keeping its input for the backward), the
// GELU's gradient in c_proj's input-gradient GEMM, and the bias gradients (BGRADA/BGRADB in the weight
// gradient's GEMM, BGRAD beside DGELU). Where cuBLASLt offers no algorithm for a fusion (LtMatmul::
// try_run) the unfused ops run instead: the separate GELU kernels (gelu.cu) and the deterministic column
// sums (column_sums.cuh). Bias gradients always come out in fp32 (backend.hpp), never through a 16-bit
// vector: an epilogue that cannot write fp32 is not used.
//
// Row-major to cuBLASLt's column-major: a row-major [R, C] matrix is the column-major [C, R] matrix
// (its transpose) with leading dimension C. So a row-major product Y = P Q is computed as the
// column-major Y^T = Q^T P^T, each transpose being the operand as stored. The four products below are
// written in that form, with the shapes as cuBLASLt sees them.
#include <cstdint>

#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/column_sums.cuh"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"

namespace zt::backend::cuda {
namespace {

using Dims = MatmulDims;

// The epilogue fusions, on unless a device check shows one wrong or not bitwise repeatable on some
// cuBLASLt (tests/gpu/test_cuda_fused_ops.cpp): false runs the unfused ops, the same results as a refusal.
constexpr bool kFuseGelu = true;      // GELU_AUX(_BIAS) forward, DGELU(_BGRAD) backward
constexpr bool kFuseBiasGrad = true;  // BGRADA/BGRADB in the weight GEMM, BGRAD beside DGELU

// The shared shape checks (op_checks.hpp), and out and weight in inp's compute dtype.
Dims check_matmul(const char* op, const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                  WeightLayout layout) {
  const Dims d = check_matmul_shapes(op, out, inp, weight, bias, layout);
  expect_compute(op, "out", out, inp.dtype);
  expect_compute(op, "weight", weight, inp.dtype);
  return d;
}

// Y[N,OC] = inp[N,IC] @ W (+ bias): column-major Y^T [OC,N] = W' [OC,IC] * inp^T [IC,N], where the
// stored kInOut W [IC,OC] reads as [OC,IC] (ld OC) as it is, and the stored kOutIn W [OC,IC] reads as
// [IC,OC] (ld IC) and is transposed. The bias runs along Y^T's rows: cuBLASLt's bias epilogue.
LtGemm forward_gemm(const Dims& d, const Tensor& out, const Tensor& inp, const Tensor& weight, const void* bias,
                    bool in_out) {
  LtGemm g;
  g.m = d.oc, g.n = d.n, g.k = d.ic;
  g.trans_a = !in_out;
  g.a = weight.data, g.lda = in_out ? d.oc : d.ic;
  g.b = inp.data, g.ldb = d.ic;
  g.ab_type = inp.dtype;
  g.d = out.data, g.ldd = d.oc, g.d_type = out.dtype;
  g.bias = bias;
  return g;
}

// dinp[N,IC] = dout[N,OC] @ W_math^T with W_math [IC,OC] (= W for kInOut, W^T for kOutIn): column-major
// dinp^T [IC,N] = W_math [IC,OC] * dout^T [OC,N]. Stored kInOut W reads as [OC,IC] (transposed here);
// stored kOutIn W reads as [IC,OC] = W_math.
LtGemm dinp_gemm(const Dims& d, const Tensor& dinp, const Tensor& dout, const Tensor& weight, bool in_out) {
  LtGemm g;
  g.m = d.ic, g.n = d.n, g.k = d.oc;
  g.trans_a = in_out;
  g.a = weight.data, g.lda = in_out ? d.oc : d.ic;
  g.b = dout.data, g.ldb = d.oc;
  g.ab_type = dout.dtype;
  g.d = dinp.data, g.ldd = d.ic, g.d_type = dinp.dtype;
  return g;
}

// dweight += (f32, beta = 1):
//   kInOut dW [IC,OC] += inp^T dout: column-major dW^T [OC,IC] = dout^T [OC,N] * inp [N,IC] (inp^T read
//          as stored [IC,N], transposed);
//   kOutIn dW [OC,IC] += dout^T inp: column-major dW^T [IC,OC] = inp^T [IC,N] * dout [N,OC].
LtGemm dweight_gemm(const Dims& d, const Tensor& dweight, const Tensor& dout, const Tensor& inp, bool in_out) {
  LtGemm g;
  g.m = in_out ? d.oc : d.ic, g.n = in_out ? d.ic : d.oc, g.k = d.n;
  g.trans_b = true;
  g.a = in_out ? dout.data : inp.data, g.lda = in_out ? d.oc : d.ic;
  g.b = in_out ? inp.data : dout.data, g.ldb = in_out ? d.ic : d.oc;
  g.ab_type = inp.dtype;
  g.d = dweight.data, g.ldd = g.m, g.d_type = DType::kF32;
  g.beta = 1.0f;
  return g;
}

// Row n's contribution to dbias at column c.
template <typename T>
struct BiasGradTerm {
  const T* dout;
  std::int64_t OC;
  __device__ void operator()(std::int64_t n, std::int64_t c, float (&acc)[1]) const {
    acc[0] += to_f32(dout[n * OC + c]);
  }
};

// dbias [OC] f32 += sum over the N rows of dout [N,OC] (X), a deterministic two-pass column sum.
void bias_column_sums(CudaBackend& be, cudaStream_t stream, const Tensor& dbias, const Tensor& dout, std::int64_t N,
                      std::int64_t OC, const char* op) {
  if (N == 0 || OC == 0) return;
  Buffer scratch = be.allocate(column_sums_scratch_bytes(N, OC, 1));
  dispatch_float(dout.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    column_sums_accumulate<1>(BiasGradTerm<X>{static_cast<const X*>(dout.data), OC}, N, OC,
                              ColumnOutputs<1>{{static_cast<float*>(dbias.data)}}, static_cast<float*>(scratch.data()),
                              stream);
  });
}

}  // namespace

// A bias viewed at an offset into a flat parameter buffer may sit below the epilogue's alignment
// (lt_matmul.hpp: the kernel would fault): copy it, on the stream, into a fresh allocator block, which
// cudaMalloc aligns to 256 bytes. GPT-2's biases start at multiples of 64 elements and never need it;
// odd shapes pay one [OC] device copy. Null for an empty bias.
const void* CudaBackend::aligned_bias(const Tensor& bias, Buffer& staged) {
  if (bias.empty()) return nullptr;
  if (reinterpret_cast<std::uintptr_t>(bias.data) % kLtBiasAlignment == 0) return bias.data;
  staged = allocate(bias.bytes());
  copy(staged.data(), bias.data, bias.bytes());
  return staged.data();
}

// g with the bias-gradient epilogue e writing into a fresh fp32 block (the epilogue writes, the gradient
// rule adds), then dbias += that block. False, with nothing queued, where cuBLASLt has no such kernel.
bool CudaBackend::gemm_with_bias_grad(LtGemm g, LtEpilogue e, const Tensor& dbias, const char* op) {
  Buffer grad = allocate(static_cast<std::size_t>(dbias.numel()) * sizeof(float));
  g.epilogue = e;
  g.bias = grad.data();
  g.bias_type = DType::kF32;
  if (!lt_->try_run(g, stream_, op)) return false;
  accumulate(dbias, Tensor(grad.data(), DType::kF32, {dbias.numel()}));
  return true;
}

void CudaBackend::matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, WeightLayout layout) {
  const char* op = "matmul_forward";
  const Dims d = check_matmul(op, out, inp, weight, bias, layout);
  if (!bias.empty()) expect_compute(op, "bias", bias, inp.dtype);
  if (d.n == 0 || d.oc == 0) return;
  ZT_CHECK_GT(d.ic, 0, op, ": inp ", inp.shape_string(), " has no columns");
  Buffer staged_bias;
  lt_->run(forward_gemm(d, out, inp, weight, aligned_bias(bias, staged_bias), layout == WeightLayout::kInOut), stream_,
           op);
}

// dinp = dout @ W^T (written, skipped if empty); dweight += (f32, skipped if empty: a frozen weight);
// dbias += column sums of dout (f32, skipped if empty).
void CudaBackend::matmul_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                                  WeightLayout layout) {
  const char* op = "matmul_backward";
  const Dims d = check_matmul(op, dout, inp, weight, dbias, layout);
  if (!dweight.empty()) {  // empty: a frozen weight, no gradient
    expect_shape(op, "dweight", dweight, {weight.dim(0), weight.dim(1)});
    expect_dtype(op, "dweight", dweight, DType::kF32);
  }
  if (!dbias.empty()) expect_dtype(op, "dbias", dbias, DType::kF32);
  const bool in_out = layout == WeightLayout::kInOut;
  if (!dinp.empty()) {
    expect_rows(op, "dinp", dinp, d.n, d.ic);
    expect_compute(op, "dinp", dinp, inp.dtype);
  }
  if (d.n == 0) return;  // no rows: dinp is empty and nothing adds to the gradients
  if (!dinp.empty()) {
    if (d.oc > 0) lt_->run(dinp_gemm(d, dinp, dout, weight, in_out), stream_, op);
    else fill_zero(dinp);  // a sum over no output columns
  }
  bool dbias_pending = !dbias.empty() && d.oc > 0;
  if (!dweight.empty() && d.ic > 0 && d.oc > 0) {
    // dout is A (kInOut: its OC rows summed over k = N) or B (kOutIn: its OC columns summed over k).
    const LtGemm g = dweight_gemm(d, dweight, dout, inp, in_out);
    const bool fused = kFuseBiasGrad && dbias_pending &&
                       gemm_with_bias_grad(g, in_out ? LtEpilogue::kBgradA : LtEpilogue::kBgradB, dbias, op);
    if (!fused) lt_->run(g, stream_, op);
    dbias_pending = dbias_pending && !fused;
  }
  if (dbias_pending) bias_column_sums(*this, stream_, dbias, dout, d.n, d.oc, op);
}

// dinp (f32) += dout @ W^T: the input-gradient GEMM with an fp32 D and beta = 1.
void CudaBackend::matmul_backward_input_accumulate(Tensor dinp, Tensor dout, Tensor weight, WeightLayout layout) {
  const char* op = "matmul_backward_input_accumulate";
  const Dims d = check_matmul_input_grad_shapes(op, dinp, dout, weight, layout);
  expect_dtype(op, "dinp", dinp, DType::kF32);
  expect_compute(op, "weight", weight, dout.dtype);
  if (d.n == 0 || d.ic == 0 || d.oc == 0) return;  // nothing to add
  LtGemm g = dinp_gemm(d, dinp, dout, weight, layout == WeightLayout::kInOut);
  g.beta = 1.0f;
  lt_->run(g, stream_, op);
}

// pre = inp @ W + bias and out = gelu(pre) from one GEMM (GELU_AUX_BIAS: pre is the epilogue's aux
// output, [N,OC] row-major = column-major [OC,N] with ld OC, which cuBLASLt wants a multiple of 8).
// Otherwise the two ops.
void CudaBackend::matmul_gelu_forward(Tensor out, Tensor pre, Tensor inp, Tensor weight, Tensor bias,
                                      WeightLayout layout) {
  const char* op = "matmul_gelu_forward";
  const Dims d = check_matmul(op, out, inp, weight, bias, layout);
  expect_rows(op, "pre", pre, d.n, d.oc);
  expect_compute(op, "pre", pre, inp.dtype);
  if (!bias.empty()) expect_compute(op, "bias", bias, inp.dtype);
  ZT_CHECK(out.data != pre.data || d.n * d.oc == 0, op, ": out must not alias pre (the backward needs pre)");
  if (d.n == 0 || d.oc == 0) return;
  ZT_CHECK_GT(d.ic, 0, op, ": inp ", inp.shape_string(), " has no columns");
  Buffer staged_bias;
  LtGemm g = forward_gemm(d, out, inp, weight, aligned_bias(bias, staged_bias), layout == WeightLayout::kInOut);
  g.epilogue = bias.empty() ? LtEpilogue::kGeluAux : LtEpilogue::kGeluAuxBias;
  g.aux = pre.data, g.ld_aux = d.oc;
  if (kFuseGelu && lt_->try_run(g, stream_, op)) return;
  matmul_forward(pre, inp, weight, bias, layout);
  gelu_forward(out, pre);
}

// dpre = (dout @ W^T) * gelu'(pre) from the input-gradient GEMM (DGELU; pre is its aux input, [N,IC]
// row-major = column-major [IC,N] with ld IC), and dbias_pre += its column sums from the same GEMM
// (DGELU_BGRAD, fp32) or, where cuBLASLt has no such kernel, from the column-sum kernel over dpre.
// Without DGELU either: the GEMM, then gelu_backward in place.
void CudaBackend::matmul_dgelu_backward(Tensor dpre, Tensor dbias_pre, Tensor dout, Tensor weight, Tensor pre,
                                        WeightLayout layout) {
  const char* op = "matmul_dgelu_backward";
  const Dims d = check_matmul(op, dout, pre, weight, Tensor(), layout);
  expect_rows(op, "dpre", dpre, d.n, d.ic);
  expect_compute(op, "dpre", dpre, pre.dtype);
  if (!dbias_pre.empty()) {
    expect_shape(op, "dbias_pre", dbias_pre, {d.ic});
    expect_dtype(op, "dbias_pre", dbias_pre, DType::kF32);
  }
  ZT_CHECK(dpre.data != dout.data || d.n == 0, op,
           ": dpre must not alias dout (the GEMM reads dout while writing dpre)");
  if (d.n == 0 || d.ic == 0) return;
  if (d.oc == 0) return fill_zero(dpre);  // a sum over no output columns; its column sums are 0
  LtGemm g = dinp_gemm(d, dpre, dout, weight, layout == WeightLayout::kInOut);
  g.aux = pre.data, g.ld_aux = d.ic;
  const bool bgrad = kFuseGelu && kFuseBiasGrad && !dbias_pre.empty();
  if (bgrad && gemm_with_bias_grad(g, LtEpilogue::kDgeluBgrad, dbias_pre, op)) return;
  g.epilogue = LtEpilogue::kDgelu;
  if (!kFuseGelu || !lt_->try_run(g, stream_, op)) {
    g.epilogue = LtEpilogue::kNone, g.aux = nullptr, g.ld_aux = 0;
    lt_->run(g, stream_, op);
    gelu_backward(dpre, pre, dpre);
  }
  if (!dbias_pre.empty()) bias_column_sums(*this, stream_, dbias_pre, dpre, d.n, d.ic, op);
}

}  // namespace zt::backend::cuda
