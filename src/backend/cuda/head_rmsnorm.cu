// RMSNorm of attention heads (Qwen3's q_norm and k_norm) on the GPU, as the CPU twin
// (cpu/head_rmsnorm.cpp): a "row" is one head of one token, hs columns at n*W + (first + h)*hs. One warp
// per head row for the row-wise parts (as rmsnorm.cu, statistic in fp32); the weight gradient is the
// deterministic two-pass column sum over all head rows (column_sums.cuh), no atomics.
#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/column_sums.cuh"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/op_checks.hpp"

namespace zt::backend::cuda {
namespace {

struct HeadRows {  // where head row r = (token n, head h) starts: n*W + (first + h)*hs
  std::int64_t W, hs, first, n;
  __host__ __device__ std::int64_t at(std::int64_t r) const { return (r / n) * W + (first + r % n) * hs; }
};

// Warp w of the block owns head row blockIdx.x * 8 + w; lane l reads columns l, l+32, ...
template <typename T>
__global__ void head_rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* weight, HeadRows h,
                                            std::int64_t rows, float eps) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;  // whole warps leave together, so the shuffles stay full-warp
  const T* x = inp + h.at(r);
  float sq = 0.0f;
  for (std::int64_t c = lane; c < h.hs; c += kWarp) sq += to_f32(x[c]) * to_f32(x[c]);
  const float rs = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(h.hs) + eps);  // IEEE, as the CPU
  T* y = out + h.at(r);
  for (std::int64_t c = lane; c < h.hs; c += kWarp)
    y[c] = from_f32<T>(to_f32(weight[c]) * to_f32(from_f32<T>(to_f32(x[c]) * rs)));
  if (lane == 0) rstd[r] = rs;
}

// dinp = rstd * (g - xhat * mean(g * xhat)), g = dout * weight, xhat = x * rstd, one warp per head row.
// A lane writes only the columns it read, after the row's sum, so dinp may alias dout.
template <typename T>
__global__ void head_rmsnorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* rstd,
                                         HeadRows h, std::int64_t rows) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const std::int64_t at = h.at(r);
  const float rs = rstd[r];
  float gx = 0.0f;
  for (std::int64_t c = lane; c < h.hs; c += kWarp) gx += to_f32(dout[at + c]) * to_f32(weight[c]) * (to_f32(inp[at + c]) * rs);
  const float gx_mean = warp_sum(gx) / static_cast<float>(h.hs);
  for (std::int64_t c = lane; c < h.hs; c += kWarp)
    dinp[at + c] = from_f32<T>(rs * (to_f32(dout[at + c]) * to_f32(weight[c]) - to_f32(inp[at + c]) * rs * gx_mean));
}

// Head row r's contribution to dweight at column c: dout * x * rstd.
template <typename T>
struct HeadNormWeightTerm {
  const T* dout;
  const T* inp;
  const float* rstd;
  HeadRows h;
  __device__ void operator()(std::int64_t r, std::int64_t c, float (&acc)[1]) const {
    const std::int64_t at = h.at(r) + c;
    acc[0] += to_f32(dout[at]) * (to_f32(inp[at]) * rstd[r]);
  }
};

HeadNormDims check_head_norm(const char* op, const Tensor& x, const Tensor& y, const Tensor& rstd, const Tensor& weight,
                             int first_head, int n_heads) {
  const HeadNormDims d = check_head_rmsnorm_shapes(op, x, y, rstd, weight, first_head, n_heads);
  expect_dtype(op, "rstd", rstd, DType::kF32);
  expect_compute(op, "output", y, x.dtype);
  expect_compute(op, "weight", weight, x.dtype);
  return d;
}

}  // namespace

void CudaBackend::head_rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, int first_head, int n_heads,
                                       float eps) {
  const char* op = "head_rmsnorm_forward";
  const HeadNormDims d = check_head_norm(op, inp, out, rstd, weight, first_head, n_heads);
  const std::int64_t rows = d.N * d.n;
  if (rows == 0) return;
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    head_rmsnorm_forward_kernel<X><<<warp_per_row_blocks(rows), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(out.data), static_cast<float*>(rstd.data), static_cast<const X*>(inp.data),
        static_cast<const X*>(weight.data), HeadRows{d.W, d.hs, d.first, d.n}, rows, eps);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

// The column sums are queued first, so dinp may overwrite dout.
void CudaBackend::head_rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight,
                                        Tensor rstd, int first_head, int n_heads) {
  const char* op = "head_rmsnorm_backward";
  const HeadNormDims d = check_head_norm(op, inp, dout, rstd, weight, first_head, n_heads);
  expect_rows(op, "dinp", dinp, d.N, d.W);
  expect_compute(op, "dinp", dinp, inp.dtype);
  expect_shape(op, "dweight", dweight, {d.hs});
  expect_dtype(op, "dweight", dweight, DType::kF32);
  const std::int64_t rows = d.N * d.n;
  if (rows == 0) return;
  const HeadRows h{d.W, d.hs, d.first, d.n};
  Buffer scratch = allocate(column_sums_scratch_bytes(rows, d.hs, 1));
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    const X* dy = static_cast<const X*>(dout.data);
    const X* x = static_cast<const X*>(inp.data);
    const float* rs = static_cast<const float*>(rstd.data);
    column_sums_accumulate<1>(HeadNormWeightTerm<X>{dy, x, rs, h}, rows, d.hs,
                              ColumnOutputs<1>{{static_cast<float*>(dweight.data)}}, static_cast<float*>(scratch.data()),
                              stream_);
    head_rmsnorm_dinp_kernel<X><<<warp_per_row_blocks(rows), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(dinp.data), dy, x, static_cast<const X*>(weight.data), rs, h, rows);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::backend::cuda
