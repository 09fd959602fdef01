// The optimizer's element-wise step on the GPU (AdamW in torch.optim.AdamW's order of operations, as
// cpu/adamw.cpp) fused with the write of the compute-dtype working copy, and the sum of squares behind
// the global gradient norm. Grid-stride loops, one thread per element.
#include <cmath>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"

namespace zt::backend::cuda {
namespace {

// Fixed grid for sum_of_squares: each block's double partial goes to the host, which adds them in
// block order, so the result depends only on the size (not on timing or the GPU model).
constexpr unsigned kSumBlocks = 1024;

// g = grad * grad_scale;  p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
// p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps);  copy = p rounded to X (if given).
// Master, moments and gradient are read once and written once in the same pass.
template <typename X>
__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, X* copy, std::int64_t n,
                             AdamScalars k) {
  for (std::int64_t i = grid_start(); i < n; i += grid_step()) {
    const float g = grad[i] * k.grad_scale;
    float p = param[i] * k.decay;
    const float mi = m[i] * k.b1 + k.one_b1 * g;
    const float vi = v[i] * k.b2 + k.one_b2 * g * g;
    p -= k.step_size * (mi / (sqrtf(vi) / k.bc2_sqrt + k.eps));
    param[i] = p;
    m[i] = mi;
    v[i] = vi;
    if (copy != nullptr) copy[i] = from_f32<X>(p);
  }
}

// partial[block] = sum of x^2 over this block's grid-stride elements, in double. NaN and inf propagate
// through the sum (fp16 overflow detection relies on it).
template <typename T>
__global__ void sum_of_squares_kernel(double* partial, const T* x, std::int64_t n) {
  double s = 0.0;
  for (std::int64_t i = grid_start(); i < n; i += grid_step()) {
    const double xi = to_f32(x[i]);
    s += xi * xi;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

}  // namespace

void CudaBackend::adamw_update(Tensor param, Tensor grad, Tensor m, Tensor v, Tensor param_copy, const AdamW& hp) {
  const char* op = "adamw_update";
  expect_same_numel(op, param, grad);
  expect_same_numel(op, param, m);
  expect_same_numel(op, param, v);
  expect_dtype(op, "param", param, DType::kF32);
  expect_dtype(op, "grad", grad, DType::kF32);
  expect_dtype(op, "m", m, DType::kF32);
  expect_dtype(op, "v", v, DType::kF32);
  if (!param_copy.empty()) expect_same_numel(op, param, param_copy);
  ZT_CHECK_GE(hp.step, 1, op, ": step is 1-based");
  const std::int64_t n = param.numel();
  const AdamScalars k = adamw_scalars(hp);
  if (n == 0) return;
  const DType copy_type = param_copy.empty() ? DType::kF32 : param_copy.dtype;
  dispatch_float(copy_type, op, [&](auto tag) {
    using X = decltype(tag);
    adamw_kernel<X><<<grid_stride_blocks(n), kBlockThreads, 0, stream_>>>(
        static_cast<float*>(param.data), static_cast<const float*>(grad.data), static_cast<float*>(m.data),
        static_cast<float*>(v.data), static_cast<X*>(param_copy.data), n, k);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

double CudaBackend::sum_of_squares(Tensor x) {
  const char* op = "sum_of_squares";
  const std::int64_t n = x.numel();
  if (n == 0) return 0.0;
  Buffer partial = allocate(kSumBlocks * sizeof(double));
  dispatch_float(x.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    sum_of_squares_kernel<T><<<kSumBlocks, kBlockThreads, 0, stream_>>>(static_cast<double*>(partial.data()),
                                                                       static_cast<const T*>(x.data), n);
  });
  ZT_CUDA_LAUNCH_CHECK();
  std::vector<double> host(kSumBlocks);
  copy_to_host(host.data(), partial.data(), partial.bytes());
  double total = 0.0;
  for (double s : host) total += s;
  return total;
}

}  // namespace zt::backend::cuda
