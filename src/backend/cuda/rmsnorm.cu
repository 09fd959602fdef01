// RMSNorm over the last dim (Zhang & Sennrich 2019), Llama's norm, forward and backward on the GPU, as
// the CPU twin (cpu/rmsnorm.cpp) and Hugging Face LlamaRMSNorm compute it: the statistic in fp32,
// x * rstd rounded to the storage type, then times the weight. One warp per row for the row-wise parts;
// the weight gradient is a deterministic two-pass column sum (column_sums.cuh), no atomics.
#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/column_sums.cuh"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"

namespace zt::backend::cuda {
namespace {

// Warp w of the block owns row blockIdx.x * 8 + w; lane l reads columns l, l+32, ...
//   rstd = 1/sqrt(mean(x^2) + eps);  out = weight * X(x * rstd)
template <typename T>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* weight, std::int64_t N, int C,
                                       float eps) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;  // whole warps leave together, so the shuffles stay full-warp
  const T* x = inp + row * C;
  float sq = 0.0f;
  for (int c = lane; c < C; c += kWarp) sq += to_f32(x[c]) * to_f32(x[c]);
  const float r = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + eps);  // IEEE, as the CPU
  T* y = out + row * C;
  for (int c = lane; c < C; c += kWarp) y[c] = from_f32<T>(to_f32(weight[c]) * to_f32(from_f32<T>(to_f32(x[c]) * r)));
  if (lane == 0) rstd[row] = r;
}

// dinp = rstd * (g - xhat * mean(g * xhat)), g = dout * weight, xhat = x * rstd, one warp per row.
// A lane writes only the columns it read, after the row's sum, so dinp may alias dout.
template <typename T>
__global__ void rmsnorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* rstd,
                                    std::int64_t N, int C) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const T* x = inp + row * C;
  const T* dy = dout + row * C;
  const float r = rstd[row];
  float gx = 0.0f;
  for (int c = lane; c < C; c += kWarp) gx += to_f32(dy[c]) * to_f32(weight[c]) * (to_f32(x[c]) * r);
  const float gx_mean = warp_sum(gx) / static_cast<float>(C);
  T* dx = dinp + row * C;
  for (int c = lane; c < C; c += kWarp)
    dx[c] = from_f32<T>(r * (to_f32(dy[c]) * to_f32(weight[c]) - to_f32(x[c]) * r * gx_mean));
}

// Row n's contribution to dweight at column c: dout * x * rstd.
template <typename T>
struct RmsNormWeightTerm {
  const T* dout;
  const T* inp;
  const float* rstd;
  std::int64_t C;
  __device__ void operator()(std::int64_t n, std::int64_t c, float (&acc)[1]) const {
    acc[0] += to_f32(dout[n * C + c]) * (to_f32(inp[n * C + c]) * rstd[n]);
  }
};

void check_rmsnorm(const char* op, const Tensor& x, const Tensor& y, const Tensor& rstd, const Tensor& weight) {
  check_rmsnorm_shapes(op, x, y, rstd, weight);
  expect_dtype(op, "rstd", rstd, DType::kF32);
  expect_compute(op, "output", y, x.dtype);
  expect_compute(op, "weight", weight, x.dtype);
}

}  // namespace

void CudaBackend::rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) {
  const char* op = "rmsnorm_forward";
  check_rmsnorm(op, inp, out, rstd, weight);
  const std::int64_t N = rows_of(inp);
  const int C = to_int(op, "C", inp.dim(-1));
  if (N == 0) return;
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    rmsnorm_forward_kernel<X><<<warp_per_row_blocks(N), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(out.data), static_cast<float*>(rstd.data), static_cast<const X*>(inp.data),
        static_cast<const X*>(weight.data), N, C, eps);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

// dinp = (written), dweight += (f32). The column sums are queued first, so dinp may overwrite dout.
void CudaBackend::rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) {
  const char* op = "rmsnorm_backward";
  check_rmsnorm(op, inp, dout, rstd, weight);
  const std::int64_t N = rows_of(inp);
  const int C = to_int(op, "C", inp.dim(-1));
  expect_rows(op, "dinp", dinp, N, C);
  expect_compute(op, "dinp", dinp, inp.dtype);
  expect_shape(op, "dweight", dweight, {C});
  expect_dtype(op, "dweight", dweight, DType::kF32);
  if (N == 0) return;
  Buffer scratch = allocate(column_sums_scratch_bytes(N, C, 1));
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    const X* dy = static_cast<const X*>(dout.data);
    const X* x = static_cast<const X*>(inp.data);
    const float* rs = static_cast<const float*>(rstd.data);
    column_sums_accumulate<1>(RmsNormWeightTerm<X>{dy, x, rs, C}, N, C,
                              ColumnOutputs<1>{{static_cast<float*>(dweight.data)}},
                              static_cast<float*>(scratch.data()), stream_);
    rmsnorm_dinp_kernel<X><<<warp_per_row_blocks(N), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(dinp.data), dy, x, static_cast<const X*>(weight.data), rs, N, C);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::backend::cuda
