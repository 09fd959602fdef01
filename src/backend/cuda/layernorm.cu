// LayerNorm over the last dim (Ba et al. 2016), eps 1e-5, forward and backward on the GPU. One warp
// per row for the row-wise parts (statistics, output, dinp), fp32 math; the weight/bias gradients are
// deterministic two-pass column sums (column_sums.cuh) rather than atomics, so they repeat bit for bit.
// Fused for GPT-2's block, as rmsnorm.cu is for Llama's: the residual add with the norm after it (res
// written once, not read back), and the input gradient added into the residual stream's.
#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/column_sums.cuh"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"

namespace zt::backend::cuda {
namespace {

constexpr float kEps = 1e-5f;

// Warp w of the block owns row blockIdx.x * 8 + w; lane l reads columns l, l+32, ... The two-pass
// variance (sum of squared deviations) matches the CPU twin and has no cancellation.
//   mean = sum(x)/C;  rstd = 1/sqrt(sum((x-mean)^2)/C + eps);  out = (x-mean)*rstd*weight + bias
template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                                         const T* bias, std::int64_t N, int C) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;  // whole warps leave together, so the shuffles below stay full-warp
  const T* x = inp + row * C;
  float sum = 0.0f;
  for (int c = lane; c < C; c += kWarp) sum += to_f32(x[c]);
  const float m = warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float d = to_f32(x[c]) - m;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + kEps);  // IEEE, as the CPU
  T* y = out + row * C;
  for (int c = lane; c < C; c += kWarp)
    y[c] = from_f32<T>((to_f32(x[c]) - m) * s * to_f32(weight[c]) + to_f32(bias[c]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// res = X(a + b), then as layernorm_forward_kernel on res. A lane reads back only the res columns it
// wrote (its own stores: no synchronisation), so res may alias a or b.
template <typename T>
__global__ void add_layernorm_forward_kernel(T* res, T* out, float* mean, float* rstd, const T* a, const T* b,
                                             const T* weight, const T* bias, std::int64_t N, int C) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  T* x = res + row * C;
  float sum = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const T v = from_f32<T>(to_f32(a[row * C + c]) + to_f32(b[row * C + c]));
    x[c] = v;
    sum += to_f32(v);
  }
  const float m = warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float d = to_f32(x[c]) - m;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + kEps);
  T* y = out + row * C;
  for (int c = lane; c < C; c += kWarp)
    y[c] = from_f32<T>((to_f32(x[c]) - m) * s * to_f32(weight[c]) + to_f32(bias[c]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// With xhat = (x - mean) * rstd and g = dout * weight, one warp per row:
//   dinp = rstd * (g - mean(g) - xhat * mean(g * xhat));  kAdd: dinp += X(that) instead (layernorm_backward
//   then accumulate, one pass).
// A lane writes only the columns it read, after the row's sums, so dinp may alias dout (not with kAdd).
template <bool kAdd, typename T>
__global__ void layernorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* mean,
                                      const float* rstd, std::int64_t N, int C) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const T* x = inp + row * C;
  const T* dy = dout + row * C;
  const float m = mean[row], r = rstd[row];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float g = to_f32(dy[c]) * to_f32(weight[c]);
    g_sum += g;
    gx_sum += g * ((to_f32(x[c]) - m) * r);
  }
  const float g_mean = warp_sum(g_sum) / static_cast<float>(C);
  const float gx_mean = warp_sum(gx_sum) / static_cast<float>(C);
  T* dx = dinp + row * C;
  for (int c = lane; c < C; c += kWarp) {
    const float g = to_f32(dy[c]) * to_f32(weight[c]);
    const T d = from_f32<T>(r * (g - g_mean - ((to_f32(x[c]) - m) * r) * gx_mean));
    dx[c] = kAdd ? from_f32<T>(to_f32(dx[c]) + to_f32(d)) : d;
  }
}

// Row n's contribution to dweight (dout * xhat) and dbias (dout) at column c.
template <typename T>
struct LayerNormParamTerm {
  const T* dout;
  const T* inp;
  const float* mean;
  const float* rstd;
  std::int64_t C;
  __device__ void operator()(std::int64_t n, std::int64_t c, float (&acc)[2]) const {
    const float dy = to_f32(dout[n * C + c]);
    acc[0] += dy * ((to_f32(inp[n * C + c]) - mean[n]) * rstd[n]);
    acc[1] += dy;
  }
};

void check_layernorm(const char* op, const Tensor& x, const Tensor& y, const Tensor& mean, const Tensor& rstd,
                     const Tensor& weight) {
  check_layernorm_shapes(op, x, y, mean, rstd, weight);
  expect_dtype(op, "mean", mean, DType::kF32);
  expect_dtype(op, "rstd", rstd, DType::kF32);
  expect_compute(op, "output", y, x.dtype);
  expect_compute(op, "weight", weight, x.dtype);
}

}  // namespace

void CudaBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias) {
  const char* op = "layernorm_forward";
  check_layernorm(op, inp, out, mean, rstd, weight);
  const std::int64_t N = rows_of(inp);
  const int C = to_int(op, "C", inp.dim(-1));
  expect_shape(op, "bias", bias, {C});
  expect_compute(op, "bias", bias, inp.dtype);
  if (N == 0) return;
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    layernorm_forward_kernel<X><<<warp_per_row_blocks(N), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(out.data), static_cast<float*>(mean.data), static_cast<float*>(rstd.data),
        static_cast<const X*>(inp.data), static_cast<const X*>(weight.data), static_cast<const X*>(bias.data), N, C);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

void CudaBackend::add_layernorm_forward(Tensor res, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b,
                                        Tensor weight, Tensor bias) {
  const char* op = "add_layernorm_forward";
  check_layernorm(op, a, out, mean, rstd, weight);
  const std::int64_t N = rows_of(a);
  const int C = to_int(op, "C", a.dim(-1));
  expect_rows(op, "b", b, N, C);
  expect_rows(op, "res", res, N, C);
  expect_shape(op, "bias", bias, {C});
  expect_compute(op, "b", b, a.dtype);
  expect_compute(op, "res", res, a.dtype);
  expect_compute(op, "bias", bias, a.dtype);
  if (N == 0) return;
  dispatch_float(a.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    add_layernorm_forward_kernel<X><<<warp_per_row_blocks(N), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(res.data), static_cast<X*>(out.data), static_cast<float*>(mean.data),
        static_cast<float*>(rstd.data), static_cast<const X*>(a.data), static_cast<const X*>(b.data),
        static_cast<const X*>(weight.data), static_cast<const X*>(bias.data), N, C);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

namespace {

// layernorm_backward's checks and launches; kAdd: dinp += the input gradient. The column sums are queued
// first, so dinp (without kAdd) may even overwrite dout.
template <bool kAdd>
void ln_backward(CudaBackend& be, cudaStream_t stream, const char* op, const Tensor& dinp, const Tensor& dweight,
                 const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, const Tensor& mean,
                 const Tensor& rstd) {
  check_layernorm(op, inp, dout, mean, rstd, weight);
  const std::int64_t N = rows_of(inp);
  const int C = to_int(op, "C", inp.dim(-1));
  const char* dname = kAdd ? "dres" : "dinp";
  expect_rows(op, dname, dinp, N, C);
  expect_compute(op, dname, dinp, inp.dtype);
  expect_shape(op, "dweight", dweight, {C});
  expect_shape(op, "dbias", dbias, {C});
  expect_dtype(op, "dweight", dweight, DType::kF32);
  expect_dtype(op, "dbias", dbias, DType::kF32);
  if (kAdd) ZT_CHECK(dinp.data != dout.data && dinp.data != inp.data, op, ": dres must not alias dout or inp");
  if (N == 0) return;
  Buffer scratch = be.allocate(column_sums_scratch_bytes(N, C, 2));
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    const X* dy = static_cast<const X*>(dout.data);
    const X* x = static_cast<const X*>(inp.data);
    const float* mu = static_cast<const float*>(mean.data);
    const float* rs = static_cast<const float*>(rstd.data);
    column_sums_accumulate<2>(LayerNormParamTerm<X>{dy, x, mu, rs, C}, N, C,
                              ColumnOutputs<2>{{static_cast<float*>(dweight.data), static_cast<float*>(dbias.data)}},
                              static_cast<float*>(scratch.data()), stream);
    layernorm_dinp_kernel<kAdd, X><<<warp_per_row_blocks(N), kBlockThreads, 0, stream>>>(
        static_cast<X*>(dinp.data), dy, x, static_cast<const X*>(weight.data), mu, rs, N, C);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace

// dinp = (written), dweight += , dbias += (f32).
void CudaBackend::layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                                     Tensor weight, Tensor mean, Tensor rstd) {
  ln_backward<false>(*this, stream_, "layernorm_backward", dinp, dweight, dbias, dout, inp, weight, mean, rstd);
}

// dres += dinp, dweight += , dbias += (f32).
void CudaBackend::layernorm_backward_accumulate(Tensor dres, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                                                Tensor weight, Tensor mean, Tensor rstd) {
  ln_backward<true>(*this, stream_, "layernorm_backward_accumulate", dres, dweight, dbias, dout, inp, weight, mean,
                    rstd);
}

}  // namespace zt::backend::cuda
