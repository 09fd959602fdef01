// Element-wise ops: the residual add, gradient accumulation, scaling and dtype casts. Each element is
// independent, so any thread split gives the same bits; aliasing is allowed where backend.hpp says so.
// In a 16-bit compute dtype each element is widened, combined in fp32 and rounded once.
#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/precision.hpp"

namespace zt::backend::cpu {
namespace {

template <typename T>
void add_kernel(T* z, const T* x, const T* y, std::int64_t n, int threads) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) z[i] = store<T>(load(x[i]) + load(y[i]));
}

template <typename D, typename S>
void accumulate_kernel(D* d, const S* s, std::int64_t n, int threads) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) d[i] = store<D>(load(d[i]) + load(s[i]));
}

template <typename T>
void scale_kernel(T* p, float factor, std::int64_t n, int threads) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) p[i] = store<T>(load(p[i]) * factor);
}

}  // namespace

// out = a + b (out may alias a or b: each element is read before it is written)
void CpuBackend::add(Tensor out, Tensor a, Tensor b) {
  const char* op = "add";
  const DType x = compute_dtype(op, {{"out", out, Role::kCompute}, {"a", a, Role::kCompute}, {"b", b, Role::kCompute}});
  expect_same_numel(op, out, a);
  expect_same_numel(op, out, b);
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    add_kernel(data_as<T>(out), data_as<T>(a), data_as<T>(b), out.numel(), threads_);
  });
}

// dst += src (both f32, or both X; or dst f32 += src X)
void CpuBackend::accumulate(Tensor dst, Tensor src) {
  const char* op = "accumulate";
  expect_same_numel(op, dst, src);
  if (dst.dtype == DType::kF32 && src.dtype != DType::kF32) {  // a 16-bit source widened into fp32
    compute_dtype(op, {{"src", src, Role::kFloat}});
    return with_storage(src.dtype, [&](auto tag) {
      accumulate_kernel(data_as<float>(dst), data_as<decltype(tag)>(src), dst.numel(), threads_);
    });
  }
  const DType x = compute_dtype(op, {{"dst", dst, Role::kCompute}, {"src", src, Role::kCompute}});
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    accumulate_kernel(data_as<T>(dst), data_as<T>(src), dst.numel(), threads_);
  });
}

// x *= factor (f32 or X)
void CpuBackend::scale(Tensor x, float factor) {
  const DType dtype = compute_dtype("scale", {{"x", x, Role::kCompute}});
  with_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    scale_kernel(data_as<T>(x), factor, x.numel(), threads_);
  });
}

// dst = src converted between any two of f32, bf16 and f16. Widening to fp32 is exact, so a 16-bit to
// 16-bit cast rounds once (nearest even), like any other.
void CpuBackend::cast(Tensor dst, Tensor src) {
  const char* op = "cast";
  compute_dtype(op, {{"dst", dst, Role::kFloat}, {"src", src, Role::kFloat}});
  expect_same_numel(op, dst, src);
  if (src.dtype == dst.dtype) return copy(dst.data, src.data, src.bytes());
  const std::int64_t n = src.numel();
  with_storage(src.dtype, [&](auto src_tag) {
    with_storage(dst.dtype, [&](auto dst_tag) {
      using S = decltype(src_tag);
      using D = decltype(dst_tag);
      const S* s = data_as<S>(src);
      D* d = data_as<D>(dst);
#pragma omp parallel for num_threads(threads_) schedule(static)
      for (std::int64_t i = 0; i < n; ++i) d[i] = store<D>(load(s[i]));
    });
  });
}

}  // namespace zt::backend::cpu
