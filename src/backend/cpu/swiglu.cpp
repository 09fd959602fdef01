// SwiGLU (Shazeer 2020), Llama's MLP activation: out = silu(gate) * up over inp = (gate | up), fused so
// the [N,F] silu(gate) is neither stored nor re-read. As Hugging Face computes it in 16 bits, silu(gate) is
// rounded to the storage type before the product (exact in fp32); backward is fp32 math, rounded once.
#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/precision.hpp"
#include "backend/cpu/vec_math.hpp"

namespace zt::backend::cpu {
namespace {

// One row: y[j] = X(silu(g[j])) * u[j], silu(g) = g / (1 + e^-g).
template <typename T>
ZT_SIMD_CLONES void swiglu_forward_row(T* y, const T* g, const T* u, std::int64_t F) {
#pragma omp simd
  for (std::int64_t j = 0; j < F; ++j) {
    const float v = load(g[j]);
    y[j] = store<T>(load(store<T>(v / (1.0f + fast_exp(-v)))) * load(u[j]));
  }
}

// One row, s = sigmoid(g): dgate = dout * up * s (1 + g (1 - s)); dup = dout * g s.
template <typename T>
ZT_SIMD_CLONES void swiglu_backward_row(T* dg, T* du, const T* g, const T* u, const T* dy, std::int64_t F) {
#pragma omp simd
  for (std::int64_t j = 0; j < F; ++j) {
    const float v = load(g[j]), up = load(u[j]), d = load(dy[j]);
    const float s = 1.0f / (1.0f + fast_exp(-v));
    dg[j] = store<T>(d * up * s * (1.0f + v * (1.0f - s)));
    du[j] = store<T>(d * v * s);
  }
}

}  // namespace

void CpuBackend::swiglu_forward(Tensor out, Tensor inp) {
  const char* op = "swiglu_forward";
  const std::int64_t F = check_swiglu_shapes(op, out, inp), N = rows_of(out);
  const DType dtype = compute_dtype(op, {{"out", out, Role::kCompute}, {"inp", inp, Role::kCompute}});
  with_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = data_as<T>(inp);
    T* y = data_as<T>(out);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t n = 0; n < N; ++n) swiglu_forward_row(y + n * F, x + n * 2 * F, x + n * 2 * F + F, F);
  });
}

void CpuBackend::swiglu_backward(Tensor dinp, Tensor inp, Tensor dout) {
  const char* op = "swiglu_backward";
  const std::int64_t F = check_swiglu_shapes(op, dout, inp), N = rows_of(dout);
  expect_rows(op, "dinp", dinp, N, 2 * F);
  const DType dtype = compute_dtype(
      op, {{"dinp", dinp, Role::kCompute}, {"inp", inp, Role::kCompute}, {"dout", dout, Role::kCompute}});
  ZT_CHECK(dinp.data != inp.data && dinp.data != dout.data, op, ": dinp must not alias inp or dout");
  with_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = data_as<T>(inp);
    T* dx = data_as<T>(dinp);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t n = 0; n < N; ++n)
      swiglu_backward_row(dx + n * 2 * F, dx + n * 2 * F + F, x + n * 2 * F, x + n * 2 * F + F,
                          data_as<T>(dout) + n * F, F);
  });
}

}  // namespace zt::backend::cpu
