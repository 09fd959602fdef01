// Launch sizes and warp/block reductions shared by the CUDA ops, so every kernel file sizes its grid
// the same way and no reduction is written twice.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace zt::backend::cuda {

constexpr int kWarp = 32;
constexpr int kBlockThreads = 256;  // 8 warps: full occupancy on sm_90 for the light element-wise kernels
// Grid-stride kernels never launch more blocks than this: 132 SMs x 8 resident 256-thread blocks is
// ~1k, so 4096 fills any current GPU several times over and the loop covers larger tensors.
constexpr std::int64_t kMaxGridBlocks = 4096;

// Blocks for a grid-stride loop over n elements with kBlockThreads threads each (at least 1).
inline unsigned grid_stride_blocks(std::int64_t n) {
  const std::int64_t blocks = (n + kBlockThreads - 1) / kBlockThreads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxGridBlocks));
}

// Blocks for one warp per row (kBlockThreads / kWarp rows per block). Rows beyond 2^31 blocks' worth
// are not a GPT-2 shape; the caller's shape check guards the int conversion.
inline unsigned warp_per_row_blocks(std::int64_t rows) {
  constexpr int kRowsPerBlock = kBlockThreads / kWarp;
  return static_cast<unsigned>(std::max<std::int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, 1));
}

// Grid-stride loops: for (std::int64_t i = grid_start(); i < n; i += grid_step()). 64-bit, as a
// [B*T, Vp] logits tensor passes 2^31 elements.
__device__ __forceinline__ std::int64_t grid_start() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_step() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__device__ __forceinline__ double warp_sum(double x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total. The
// order is fixed by the thread layout, so the result is the same on every run.
template <typename T>
__device__ T block_sum(T x) {
  __shared__ T partial[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  x = warp_sum(x);
  __syncthreads();  // partial[] may still be read by a previous call in the same kernel
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  x = lane < warps ? partial[lane] : T(0);
  return warp_sum(x);
}

}  // namespace zt::backend::cuda
