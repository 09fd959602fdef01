// The optimizer's element-wise step (AdamW, Loshchilov & Hutter 2019, in torch.optim.AdamW's exact
// order of operations) and the sum of squares behind the global gradient norm.
#include <cmath>
#include <vector>

#include "backend/cpu/checks.hpp"
#include "backend/cpu/cpu_backend.hpp"

namespace zt::backend::cpu {
namespace {
// sum_of_squares adds fixed blocks of this many elements, then the block sums in order: the same bits
// for any thread count.
constexpr std::int64_t kSumBlock = 1 << 14;
}  // namespace

// torch.optim.AdamW (PyTorch 1.13, single-tensor path), with g = grad * grad_scale:
//   p *= 1 - lr * wd
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
void CpuBackend::adamw_update(Tensor param, Tensor grad, Tensor m, Tensor v, const AdamW& hp) {
  const char* op = "adamw_update";
  expect_same_numel(op, param, grad);
  expect_same_numel(op, param, m);
  expect_same_numel(op, param, v);
  ZT_CHECK_GE(hp.step, 1, op, ": step is 1-based");
  float* p = param.f32(op);
  const float* g = grad.f32(op);
  float* m1 = m.f32(op);
  float* m2 = v.f32(op);
  const std::int64_t n = param.numel();
  // Scalars in double as PyTorch computes them in Python, then used as float (its opmath type).
  const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), hp.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), hp.step);
  const float step_size = static_cast<float>(hp.lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = static_cast<float>(1.0 - static_cast<double>(hp.lr) * hp.weight_decay);
  const float b1 = hp.beta1, b2 = hp.beta2, eps = hp.eps, gs = hp.grad_scale;
  const float one_b1 = static_cast<float>(1.0 - hp.beta1), one_b2 = static_cast<float>(1.0 - hp.beta2);
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * gs;
    p[i] *= decay;
    m1[i] = m1[i] * b1 + one_b1 * gi;
    m2[i] = m2[i] * b2 + one_b2 * gi * gi;
    p[i] -= step_size * (m1[i] / (std::sqrt(m2[i]) / bc2_sqrt + eps));
  }
}

double CpuBackend::sum_of_squares(Tensor x) {
  const float* p = x.f32("sum_of_squares");
  const std::int64_t n = x.numel(), blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> partial(blocks, 0.0);
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t end = std::min(n, (b + 1) * kSumBlock);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = b * kSumBlock; i < end; ++i) s += static_cast<double>(p[i]) * p[i];
    partial[b] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace zt::backend::cpu
