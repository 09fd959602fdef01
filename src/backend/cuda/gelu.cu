// GELU in GPT-2's tanh form (Hendrycks & Gimpel 2016), forward and backward, element-wise in 16-byte
// packs (vector_map.cuh), fp32 math. Same identity as the CPU twin (cpu/gelu.cpp): 1 + tanh(u) = 2
// sigmoid(2u), which has no cancellation for u << 0.
#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/vector_map.cuh"

namespace zt::backend::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// e^{-2u} with the exponent clamped as the CPU's fast_exp clamps it: for x < -10, e^{-2u} overflows,
// and s^2 e would be 0 * inf = NaN in backward instead of the true ~0.
__device__ __forceinline__ float exp_neg_2u(float u) { return expf(fminf(fmaxf(-2.0f * u, -87.3f), 88.3f)); }

// u = sqrt(2/pi) (x + 0.044715 x^3);  out = 0.5 x (1 + tanh(u)) = x / (1 + e^{-2u})
struct GeluForward {
  __device__ float operator()(float x) const {
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    return x / (1.0f + exp_neg_2u(u));
  }
};

// dinp = dout * (s + 2 x s^2 e du/dx) with e = e^{-2u}, s = 1/(1 + e), du/dx = sqrt(2/pi)(1 + 3*0.044715 x^2)
// (the derivation is in cpu/gelu.cpp). dinp may alias dout (vector_map.cuh reads before it writes).
struct GeluBackward {
  __device__ float operator()(float x, float dout) const {
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float e = exp_neg_2u(u);
    const float s = 1.0f / (1.0f + e);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    return dout * (s + 2.0f * x * s * s * e * du);
  }
};

}  // namespace

void CudaBackend::gelu_forward(Tensor out, Tensor inp) {
  const char* op = "gelu_forward";
  expect_same_numel(op, out, inp);
  expect_compute(op, "out", out, inp.dtype);
  const std::int64_t n = inp.numel();
  if (n == 0) return;
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    launch_map<T, 1>(stream_, static_cast<T*>(out.data), {static_cast<const T*>(inp.data)}, n, GeluForward{});
  });
  ZT_CUDA_LAUNCH_CHECK();
}

void CudaBackend::gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
  const char* op = "gelu_backward";
  expect_same_numel(op, dinp, inp);
  expect_same_numel(op, dout, inp);
  expect_compute(op, "dinp", dinp, inp.dtype);
  expect_compute(op, "dout", dout, inp.dtype);
  const std::int64_t n = inp.numel();
  if (n == 0) return;
  dispatch_float(inp.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    launch_map<T, 2>(stream_, static_cast<T*>(dinp.data),
                     {static_cast<const T*>(inp.data), static_cast<const T*>(dout.data)}, n, GeluBackward{});
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::backend::cuda
