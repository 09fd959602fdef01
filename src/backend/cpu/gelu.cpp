// GELU in GPT-2's tanh form (Hendrycks & Gimpel 2016, eq. for the approximation), forward and backward.
#include <cmath>

#include "backend/cpu/checks.hpp"
#include "backend/cpu/cpu_backend.hpp"

namespace zt::backend::cpu {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void CpuBackend::gelu_forward(Tensor out, Tensor inp) {
  const char* op = "gelu_forward";
  expect_same_numel(op, out, inp);
  const float* x = inp.f32(op);
  float* y = out.f32(op);
  const std::int64_t n = inp.numel();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
}

// With u = sqrt(2/pi) (x + 0.044715 x^3) and t = tanh(u):
//   d out / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// dinp = dout * that (written); dinp may alias dout (each element is read before it is written).
void CpuBackend::gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
  const char* op = "gelu_backward";
  expect_same_numel(op, dinp, inp);
  expect_same_numel(op, dout, inp);
  const float* x = inp.f32(op);
  const float* dy = dout.f32(op);
  float* dx = dinp.f32(op);
  const std::int64_t n = inp.numel();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

}  // namespace zt::backend::cpu
