// Fused softmax + cross-entropy over the first `vocab` columns of padded logits [N, Vp] on the GPU,
// forward and backward. One block per row; each thread keeps an online (max, sum of exp) over its
// strided columns (Milakov & Gimelshein 2018), merged across the block, so the row is read once for
// the log-sum-exp and the probabilities are formed once, only where backward writes them.
#include <math_constants.h>

#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"

namespace zt::backend::cuda {
namespace {

// 512 threads: a 50k-wide GPT-2 row is ~100 columns per thread, and N blocks of 512 fill the GPU.
constexpr int kRowThreads = 512;

// Running softmax denominator: sum_j exp(x_j - max).
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  // Both without a finite column: -inf - -inf would be NaN; the sums are 0 (or NaN, which must survive).
  if (m == -CUDART_INF_F) return {m, a.sum + b.sum};
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

// One more column x into a thread's running pair: one exp per column. A -inf logit adds nothing (and
// must not meet a -inf max: -inf - -inf is NaN); a NaN logit propagates.
__device__ __forceinline__ MaxSum fold(MaxSum a, float x) {
  if (x == -CUDART_INF_F) return a;
  if (x > a.max) return {x, a.sum * expf(a.max - x) + 1.0f};
  return {a.max, a.sum + expf(x - a.max)};
}

// The row's log-sum-exp over columns [0, vocab): each thread folds its columns online, then warps and
// the block merge their (max, sum) pairs. Every thread returns the same value; the block-wide
// __syncthreads inside orders all reads of the row before any later write to it.
template <typename T>
__device__ float row_lse(const T* row, int vocab) {
  __shared__ MaxSum partial[kRowThreads / kWarp];
  MaxSum acc{-CUDART_INF_F, 0.0f};
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) acc = fold(acc, to_f32(row[j]));
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    acc = merge(acc, MaxSum{__shfl_xor_sync(0xffffffffu, acc.max, offset),
                            __shfl_xor_sync(0xffffffffu, acc.sum, offset)});
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  MaxSum total{-CUDART_INF_F, 0.0f};
  for (int w = 0; w < static_cast<int>(blockDim.x / kWarp); ++w) total = merge(total, partial[w]);  // fixed order
  return total.max + logf(total.sum);
}

// losses[n] = lse(logits[n, :vocab]) - logits[n, targets[n]]; an ignored target (kIgnoreTarget) gives 0
// without reading the row, any other target outside [0, vocab) NaN. The test is block-uniform (one row
// per block), so the early return skips row_lse's barrier for the whole block or for none of it.
template <typename T>
__global__ void cross_entropy_forward_kernel(float* losses, const T* logits, const std::int32_t* targets, int Vp,
                                             int vocab) {
  const std::int64_t n = blockIdx.x;
  if (targets[n] == kIgnoreTarget) {
    if (threadIdx.x == 0) losses[n] = 0.0f;
    return;
  }
  const T* row = logits + n * Vp;
  const float lse = row_lse(row, vocab);
  if (threadIdx.x == 0) {
    const std::int32_t t = targets[n];
    losses[n] = t >= 0 && t < vocab ? lse - to_f32(row[t]) : CUDART_NAN_F;
  }
}

// dlogits[n, j] = dloss * (exp(logits[n, j] - lse) - [j == target]) for j < vocab, 0 for padded j.
// In place is safe: each thread rewrites only the columns it reads, after row_lse's barrier. An ignored
// target's row is all zeros (block-uniform branch, as in forward).
template <typename T>
__global__ void cross_entropy_backward_kernel(T* dlogits, const T* logits, const std::int32_t* targets, float dloss,
                                              int Vp, int vocab) {
  const std::int64_t n = blockIdx.x;
  T* drow = dlogits + n * Vp;
  if (targets[n] == kIgnoreTarget) {
    for (int j = threadIdx.x; j < Vp; j += blockDim.x) drow[j] = from_f32<T>(0.0f);
    return;
  }
  const T* row = logits + n * Vp;
  const float lse = row_lse(row, vocab);
  const std::int32_t t = targets[n];
  const bool valid = t >= 0 && t < vocab;
  for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
    float d = 0.0f;
    if (j < vocab) d = valid ? dloss * expf(to_f32(row[j]) - lse) - (j == t ? dloss : 0.0f) : CUDART_NAN_F;
    drow[j] = from_f32<T>(d);
  }
}

// Returns the row count; checks shapes and dtypes shared by forward and backward.
std::int64_t check_ce(const char* op, const Tensor& logits, const Tensor& targets, int vocab) {
  const std::int64_t N = rows_of(logits), Vp = logits.dim(-1);
  ZT_CHECK(vocab > 0 && vocab <= Vp, op, ": vocab=", vocab, " must be in [1, ", Vp, "] (logits ",
           logits.shape_string(), ")");
  ZT_CHECK_EQ(targets.numel(), N, op, ": targets ", targets.shape_string(), " needs one per row of logits ",
              logits.shape_string());
  expect_dtype(op, "targets", targets, DType::kI32);
  to_int(op, "Vp", Vp);
  ZT_CHECK_LE(N, std::int64_t{0x7fffffff}, op, ": ", N, " rows exceed the grid limit");
  return N;
}

}  // namespace

void CudaBackend::cross_entropy_forward(Tensor losses, Tensor logits, Tensor targets, int vocab) {
  const char* op = "cross_entropy_forward";
  const std::int64_t N = check_ce(op, logits, targets, vocab);
  ZT_CHECK_EQ(losses.numel(), N, op, ": losses ", losses.shape_string(), " needs one per row");
  expect_dtype(op, "losses", losses, DType::kF32);
  if (N == 0) return;
  const int Vp = static_cast<int>(logits.dim(-1));
  dispatch_float(logits.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    cross_entropy_forward_kernel<X><<<static_cast<unsigned>(N), kRowThreads, 0, stream_>>>(
        static_cast<float*>(losses.data), static_cast<const X*>(logits.data),
        static_cast<const std::int32_t*>(targets.data), Vp, vocab);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

void CudaBackend::cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor targets, float dloss, int vocab) {
  const char* op = "cross_entropy_backward";
  const std::int64_t N = check_ce(op, logits, targets, vocab);
  const int Vp = static_cast<int>(logits.dim(-1));
  expect_rows(op, "dlogits", dlogits, N, Vp);
  expect_compute(op, "dlogits", dlogits, logits.dtype);
  if (N == 0) return;
  dispatch_float(logits.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    cross_entropy_backward_kernel<X><<<static_cast<unsigned>(N), kRowThreads, 0, stream_>>>(
        static_cast<X*>(dlogits.data), static_cast<const X*>(logits.data),
        static_cast<const std::int32_t*>(targets.data), dloss, Vp, vocab);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::backend::cuda
