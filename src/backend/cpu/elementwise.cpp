// Element-wise ops: the residual add, gradient accumulation, scaling and dtype casts. Each element is
// independent, so any thread split gives the same bits; aliasing is allowed where backend.hpp says so.
#include "backend/cpu/checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/half.hpp"

namespace zt::backend::cpu {

// out = a + b (out may alias a or b)
void CpuBackend::add(Tensor out, Tensor a, Tensor b) {
  const char* op = "add";
  expect_same_numel(op, out, a);
  expect_same_numel(op, out, b);
  const float* x = a.f32(op);
  const float* y = b.f32(op);
  float* z = out.f32(op);
  const std::int64_t n = out.numel();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}

// dst += src
void CpuBackend::accumulate(Tensor dst, Tensor src) {
  const char* op = "accumulate";
  expect_same_numel(op, dst, src);
  const float* s = src.f32(op);
  float* d = dst.f32(op);
  const std::int64_t n = dst.numel();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) d[i] += s[i];
}

// x *= factor
void CpuBackend::scale(Tensor x, float factor) {
  float* p = x.f32("scale");
  const std::int64_t n = x.numel();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) p[i] *= factor;
}

// dst = src converted: f32 -> f32 | bf16 | f16, and bf16 | f16 -> f32 (round to nearest even).
void CpuBackend::cast(Tensor dst, Tensor src) {
  const char* op = "cast";
  expect_same_numel(op, dst, src);
  const std::int64_t n = src.numel();
  if (src.dtype == dst.dtype && src.dtype == DType::kF32) return copy(dst.data, src.data, src.bytes());
  if (src.dtype == DType::kF32 && (dst.dtype == DType::kBF16 || dst.dtype == DType::kF16)) {
    const float* s = src.f32(op);
    auto* d = static_cast<std::uint16_t*>(dst.data);
    const bool bf = dst.dtype == DType::kBF16;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) d[i] = bf ? f32_to_bf16(s[i]) : f32_to_f16(s[i]);
    return;
  }
  if (dst.dtype == DType::kF32 && (src.dtype == DType::kBF16 || src.dtype == DType::kF16)) {
    const auto* s = static_cast<const std::uint16_t*>(src.data);
    float* d = dst.f32(op);
    const bool bf = src.dtype == DType::kBF16;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) d[i] = bf ? bf16_to_f32(s[i]) : f16_to_f32(s[i]);
    return;
  }
  throw Error(cat(op, ": unsupported conversion ", dtype_name(src.dtype), " -> ", dtype_name(dst.dtype),
                  " on the cpu backend"));
}

}  // namespace zt::backend::cpu
