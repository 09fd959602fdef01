// Matmul with optional bias (GPT-2's Conv1D layers and the tied LM head) on the GPU, forward and
// backward, every product one cuBLASLt GEMM (lt_matmul.hpp) with fp32 accumulation; the bias gradient
// is a deterministic column sum (column_sums.cuh).
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

}  // namespace

void CudaBackend::matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, WeightLayout layout) {
  const char* op = "matmul_forward";
  const Dims d = check_matmul(op, out, inp, weight, bias, layout);
  if (!bias.empty()) expect_compute(op, "bias", bias, inp.dtype);
  if (d.n == 0 || d.oc == 0) return;
  ZT_CHECK_GT(d.ic, 0, op, ": inp ", inp.shape_string(), " has no columns");
  // A bias viewed at an offset into a flat parameter buffer may sit below the epilogue's alignment
  // (lt_matmul.hpp: the kernel would fault): copy it, on the stream, into a fresh allocator block,
  // which cudaMalloc aligns to 256 bytes. GPT-2's biases start at multiples of 64 elements and never
  // need it; odd shapes pay one [OC] device copy.
  Buffer staged_bias;
  const void* bias_ptr = bias.empty() ? nullptr : bias.data;
  if (bias_ptr != nullptr && reinterpret_cast<std::uintptr_t>(bias_ptr) % kLtBiasAlignment != 0) {
    staged_bias = allocate(bias.bytes());
    copy(staged_bias.data(), bias_ptr, bias.bytes());
    bias_ptr = staged_bias.data();
  }
  lt_->run(forward_gemm(d, out, inp, weight, bias_ptr, layout == WeightLayout::kInOut), stream_, op);
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
  if (!dweight.empty() && d.ic > 0 && d.oc > 0) lt_->run(dweight_gemm(d, dweight, dout, inp, in_out), stream_, op);
  if (!dbias.empty() && d.oc > 0) {
    Buffer scratch = allocate(column_sums_scratch_bytes(d.n, d.oc, 1));
    dispatch_float(dout.dtype, op, [&](auto tag) {
      using X = decltype(tag);
      column_sums_accumulate<1>(BiasGradTerm<X>{static_cast<const X*>(dout.data), d.oc}, d.n, d.oc,
                                ColumnOutputs<1>{{static_cast<float*>(dbias.data)}},
                                static_cast<float*>(scratch.data()), stream_);
    });
  }
}

}  // namespace zt::backend::cuda
