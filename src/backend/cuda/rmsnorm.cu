// RMSNorm over the last dim (Zhang & Sennrich 2019), Llama's norm, forward and backward on the GPU, as
// the CPU twin (cpu/rmsnorm.cpp) and Hugging Face LlamaRMSNorm compute it: the statistic in fp32,
// x * rstd rounded to the storage type, then times the weight. One warp per row for the row-wise parts;
// the weight gradient is a deterministic two-pass column sum (column_sums.cuh), no atomics. Fused for
// Llama's block: the residual add with the norm after it (res written once, not read back), and the
// input gradient added into the residual stream's (no [N,C] dinp written and read back).
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

// res = X(a + b), then as rmsnorm_forward_kernel on res. A lane reads back only the res columns it wrote
// (its own stores: no synchronisation), so res may alias a or b.
template <typename T>
__global__ void add_rmsnorm_forward_kernel(T* res, T* out, float* rstd, const T* a, const T* b, const T* weight,
                                           std::int64_t N, int C, float eps) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  T* x = res + row * C;
  float sq = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const T v = from_f32<T>(to_f32(a[row * C + c]) + to_f32(b[row * C + c]));
    x[c] = v;
    sq += to_f32(v) * to_f32(v);
  }
  const float r = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + eps);
  T* y = out + row * C;
  for (int c = lane; c < C; c += kWarp) y[c] = from_f32<T>(to_f32(weight[c]) * to_f32(from_f32<T>(to_f32(x[c]) * r)));
  if (lane == 0) rstd[row] = r;
}

// dinp = rstd * (g - xhat * mean(g * xhat)), g = dout * weight, xhat = x * rstd, one warp per row; kAdd:
// dinp += X(that) instead (rmsnorm_backward then accumulate, one pass).
// A lane writes only the columns it read, after the row's sum, so dinp may alias dout (not with kAdd).
template <bool kAdd, typename T>
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
  for (int c = lane; c < C; c += kWarp) {
    const T d = from_f32<T>(r * (to_f32(dy[c]) * to_f32(weight[c]) - to_f32(x[c]) * r * gx_mean));
    dx[c] = kAdd ? from_f32<T>(to_f32(dx[c]) + to_f32(d)) : d;
  }
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

void CudaBackend::add_rmsnorm_forward(Tensor res, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor weight,
                                      float eps) {
  const char* op = "add_rmsnorm_forward";
  check_rmsnorm(op, a, out, rstd, weight);
  const std::int64_t N = rows_of(a);
  const int C = to_int(op, "C", a.dim(-1));
  expect_rows(op, "b", b, N, C);
  expect_rows(op, "res", res, N, C);
  expect_compute(op, "b", b, a.dtype);
  expect_compute(op, "res", res, a.dtype);
  if (N == 0) return;
  dispatch_float(a.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    add_rmsnorm_forward_kernel<X><<<warp_per_row_blocks(N), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(res.data), static_cast<X*>(out.data), static_cast<float*>(rstd.data),
        static_cast<const X*>(a.data), static_cast<const X*>(b.data), static_cast<const X*>(weight.data), N, C, eps);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

namespace {

// rmsnorm_backward's checks and launches; kAdd: dinp += the input gradient. The column sums are queued
// first, so dinp (without kAdd) may even overwrite dout.
template <bool kAdd>
void rms_backward(CudaBackend& be, cudaStream_t stream, const char* op, const Tensor& dinp, const Tensor& dweight,
                  const Tensor& dout, const Tensor& inp, const Tensor& weight, const Tensor& rstd) {
  check_rmsnorm(op, inp, dout, rstd, weight);
  const std::int64_t N = rows_of(inp);
  const int C = to_int(op, "C", inp.dim(-1));
  expect_rows(op, kAdd ? "dres" : "dinp", dinp, N, C);
  expect_compute(op, kAdd ? "dres" : "dinp", dinp, inp.dtype);
  expect_shape(op, "dweight", dweight, {C});
  expect_dtype(op, "dweight", dweight, DType::kF32);
  if (kAdd) ZT_CHECK(dinp.data != dout.data && dinp.data != inp.data, op, ": dres must not alias dout or inp");
  if (N == 0) return;
  Buffer scratch = be.allocate(column_sums_scratch_bytes(N, C, 1));
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    const X* dy = static_cast<const X*>(dout.data);
    const X* x = static_cast<const X*>(inp.data);
    const float* rs = static_cast<const float*>(rstd.data);
    column_sums_accumulate<1>(RmsNormWeightTerm<X>{dy, x, rs, C}, N, C,
                              ColumnOutputs<1>{{static_cast<float*>(dweight.data)}},
                              static_cast<float*>(scratch.data()), stream);
    rmsnorm_dinp_kernel<kAdd, X><<<warp_per_row_blocks(N), kBlockThreads, 0, stream>>>(
        static_cast<X*>(dinp.data), dy, x, static_cast<const X*>(weight.data), rs, N, C);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace

// dinp = (written), dweight += (f32).
void CudaBackend::rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) {
  rms_backward<false>(*this, stream_, "rmsnorm_backward", dinp, dweight, dout, inp, weight, rstd);
}

// dres += dinp, dweight += (f32).
void CudaBackend::rmsnorm_backward_accumulate(Tensor dres, Tensor dweight, Tensor dout, Tensor inp, Tensor weight,
                                              Tensor rstd) {
  rms_backward<true>(*this, stream_, "rmsnorm_backward_accumulate", dres, dweight, dout, inp, weight, rstd);
}

}  // namespace zt::backend::cuda
