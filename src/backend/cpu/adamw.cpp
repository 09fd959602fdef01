// The optimizer's element-wise step (AdamW, Loshchilov & Hutter 2019, in torch.optim.AdamW's exact
// order of operations) and the sum of squares behind the global gradient norm. In mixed precision the
// step also writes the compute-dtype working copy of the parameters, in the same pass over the master.
// Built with -ffp-contract=off (src/backend/CMakeLists.txt): an element's result does not depend on
// which part of a call's loop computes it, so any cut of a tensor into calls gives the same bits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/precision.hpp"
#include "backend/cpu/vec_math.hpp"

namespace zt::backend::cpu {
namespace {
// sum_of_squares adds fixed blocks of this many elements, then the block sums in order: the same bits
// for any thread count.
constexpr std::int64_t kSumBlock = 1 << 14;
constexpr std::int64_t kChunk = 1 << 14;  // elements per AdamW task

ZT_SIMD_CLONES void adamw_kernel(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamScalars k) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * k.grad_scale;
    p[i] *= k.decay;
    m[i] = m[i] * k.b1 + k.one_b1 * gi;
    v[i] = v[i] * k.b2 + k.one_b2 * gi * gi;
    p[i] -= k.step_size * (m[i] / (std::sqrt(v[i]) / k.bc2_sqrt + k.eps));
  }
}

// copy[i] = p[i] rounded to the copy's dtype.
template <typename T>
ZT_SIMD_CLONES void round_kernel(T* copy, const float* p, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) copy[i] = store<T>(p[i]);
}

template <typename T>
ZT_SIMD_CLONES double sum_squares_kernel(const T* x, std::int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t i = 0; i < n; ++i) {
    const float xi = load(x[i]);
    s += static_cast<double>(xi) * xi;
  }
  return s;
}

}  // namespace

// torch.optim.AdamW (PyTorch 1.13, single-tensor path), with g = grad * grad_scale:
//   p *= 1 - lr * wd
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
void CpuBackend::adamw_update(Tensor param, Tensor grad, Tensor m, Tensor v, Tensor param_copy, const AdamW& hp) {
  const char* op = "adamw_update";
  compute_dtype(op, {{"param", param, Role::kF32}, {"grad", grad, Role::kF32}, {"m", m, Role::kF32},
                     {"v", v, Role::kF32}, {"param_copy", param_copy, Role::kCompute}});
  expect_same_numel(op, param, grad);
  expect_same_numel(op, param, m);
  expect_same_numel(op, param, v);
  if (!param_copy.empty()) expect_same_numel(op, param, param_copy);
  ZT_CHECK_GE(hp.step, 1, op, ": step is 1-based");
  float* p = param.f32(op);
  const float* g = grad.f32(op);
  float* m1 = m.f32(op);
  float* m2 = v.f32(op);
  const std::int64_t n = param.numel();
  const AdamScalars k = adamw_scalars(hp);
  // The copy is written chunk by chunk right after the chunk's update, while it is still in cache: one
  // pass over the master. It is a second loop rather than a store in the update loop so that the
  // update's code is the same whether or not a copy is written.
  const auto run = [&](auto* copy) {
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t i = 0; i < n; i += kChunk) {
      const std::int64_t len = std::min(kChunk, n - i);
      adamw_kernel(p + i, g + i, m1 + i, m2 + i, len, k);
      if (copy != nullptr) round_kernel(copy + i, p + i, len);
    }
  };
  if (param_copy.empty()) return run(static_cast<float*>(nullptr));
  with_storage(param_copy.dtype, [&](auto tag) { run(data_as<decltype(tag)>(param_copy)); });
}

// sum of x^2, x f32 or X (each element widened exactly, squared and added in double).
double CpuBackend::sum_of_squares(Tensor x) {
  const DType dtype = compute_dtype("sum_of_squares", {{"x", x, Role::kCompute}});
  const std::int64_t n = x.numel(), blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> partial(blocks, 0.0);
  with_storage(dtype, [&](auto tag) {
    const auto* p = data_as<decltype(tag)>(x);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t begin = b * kSumBlock;
      const double s = sum_squares_kernel(p + begin, std::min(n, begin + kSumBlock) - begin);
      partial[b] = s;
    }
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace zt::backend::cpu
