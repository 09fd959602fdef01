// GELU in GPT-2's tanh form (Hendrycks & Gimpel 2016), forward and backward. Computed through the
// identity 1 + tanh(u) = 2 sigmoid(2u), which avoids the cancellation of 1 + tanh(u) near u << 0 and
// needs one vectorisable exp per element instead of a scalar tanhf call. The kernels are instantiated per
// storage type: in mixed precision each element is widened, computed in fp32 and rounded once.
#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/precision.hpp"
#include "backend/cpu/vec_math.hpp"

namespace zt::backend::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// u = sqrt(2/pi) (x + 0.044715 x^3);  out = 0.5 x (1 + tanh(u)) = x / (1 + e^{-2u})
template <typename T>
ZT_SIMD_CLONES void gelu_forward_kernel(T* y, const T* x, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = load(x[i]);
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    y[i] = store<T>(v / (1.0f + fast_exp(-2.0f * u)));
  }
}

// d out/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx with t = tanh(u), du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
// With s = sigmoid(2u) = 1/(1 + e), e = e^{-2u}: 0.5 (1 + t) = s and 0.5 (1 - t^2) = 2 s (1 - s) = 2 s^2 e.
template <typename T>
ZT_SIMD_CLONES void gelu_backward_kernel(T* dx, const T* x, const T* dy, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = load(x[i]);
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    const float e = fast_exp(-2.0f * u);
    const float s = 1.0f / (1.0f + e);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dx[i] = store<T>(load(dy[i]) * (s + 2.0f * v * s * s * e * du));
  }
}

// Elements per task: big enough to amortise the call, small enough to balance threads.
constexpr std::int64_t kChunk = 1 << 14;

}  // namespace

void CpuBackend::gelu_forward(Tensor out, Tensor inp) {
  const char* op = "gelu_forward";
  const DType dtype = compute_dtype(op, {{"out", out, Role::kCompute}, {"inp", inp, Role::kCompute}});
  expect_same_numel(op, out, inp);
  const std::int64_t n = inp.numel();
  with_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = data_as<T>(inp);
    T* y = data_as<T>(out);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t i = 0; i < n; i += kChunk) gelu_forward_kernel(y + i, x + i, std::min(kChunk, n - i));
  });
}

// dinp = dout * gelu'(inp) (written); dinp may alias dout (each element is read before it is written).
void CpuBackend::gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
  const char* op = "gelu_backward";
  expect_same_numel(op, dinp, inp);
  expect_same_numel(op, dout, inp);
  const DType dtype = compute_dtype(
      op, {{"dinp", dinp, Role::kCompute}, {"inp", inp, Role::kCompute}, {"dout", dout, Role::kCompute}});
  const std::int64_t n = inp.numel();
  with_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = data_as<T>(inp);
    const T* dy = data_as<T>(dout);
    T* dx = data_as<T>(dinp);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t i = 0; i < n; i += kChunk)
      gelu_backward_kernel(dx + i, x + i, dy + i, std::min(kChunk, n - i));
  });
}

}  // namespace zt::backend::cpu
