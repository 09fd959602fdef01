// SwiGLU (Shazeer 2020), Llama's MLP activation, on the GPU: out = silu(gate) * up over inp = (gate | up),
// one thread per output element, fp32 math, as the CPU twin (cpu/swiglu.cpp): in 16 bits silu(gate) is
// rounded to the storage type before the product (Hugging Face's order); backward rounds each output once.
#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"

namespace zt::backend::cuda {
namespace {

// e^-g with the exponent clamped as the CPU's fast_exp clamps it (no inf * 0 for g << 0).
__device__ __forceinline__ float exp_neg(float g) { return expf(fminf(fmaxf(-g, -87.3f), 88.3f)); }

// out[n, j] = X(silu(inp[n, j])) * inp[n, F + j]
template <typename T>
__global__ void swiglu_forward_kernel(T* out, const T* inp, std::int64_t N, std::int64_t F) {
  for (std::int64_t i = grid_start(); i < N * F; i += grid_step()) {
    const std::int64_t n = i / F, j = i % F;
    const float g = to_f32(inp[n * 2 * F + j]);
    out[i] = from_f32<T>(to_f32(from_f32<T>(g / (1.0f + exp_neg(g)))) * to_f32(inp[n * 2 * F + F + j]));
  }
}

// s = sigmoid(gate): dgate = dout * up * s (1 + gate (1 - s)); dup = dout * gate * s.
template <typename T>
__global__ void swiglu_backward_kernel(T* dinp, const T* inp, const T* dout, std::int64_t N, std::int64_t F) {
  for (std::int64_t i = grid_start(); i < N * F; i += grid_step()) {
    const std::int64_t n = i / F, j = i % F, g_at = n * 2 * F + j, u_at = g_at + F;
    const float g = to_f32(inp[g_at]), up = to_f32(inp[u_at]), d = to_f32(dout[i]);
    const float s = 1.0f / (1.0f + exp_neg(g));
    dinp[g_at] = from_f32<T>(d * up * s * (1.0f + g * (1.0f - s)));
    dinp[u_at] = from_f32<T>(d * g * s);
  }
}

}  // namespace

void CudaBackend::swiglu_forward(Tensor out, Tensor inp) {
  const char* op = "swiglu_forward";
  const std::int64_t F = check_swiglu_shapes(op, out, inp), N = rows_of(out);
  expect_compute(op, "out", out, inp.dtype);
  if (N * F == 0) return;
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    swiglu_forward_kernel<X><<<grid_stride_blocks(N * F), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(out.data), static_cast<const X*>(inp.data), N, F);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

void CudaBackend::swiglu_backward(Tensor dinp, Tensor inp, Tensor dout) {
  const char* op = "swiglu_backward";
  const std::int64_t F = check_swiglu_shapes(op, dout, inp), N = rows_of(dout);
  expect_rows(op, "dinp", dinp, N, 2 * F);
  expect_compute(op, "dinp", dinp, inp.dtype);
  expect_compute(op, "dout", dout, inp.dtype);
  ZT_CHECK(dinp.data != inp.data && dinp.data != dout.data, op, ": dinp must not alias inp or dout");
  if (N * F == 0) return;
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    swiglu_backward_kernel<X><<<grid_stride_blocks(N * F), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(dinp.data), static_cast<const X*>(inp.data), static_cast<const X*>(dout.data), N, F);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::backend::cuda
