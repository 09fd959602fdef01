// Deterministic column sums over N rows, added into fp32 parameter gradients: dst[k][c] += sum_n
// term_k(n, c). Used for LayerNorm's dweight/dbias and the matmul bias gradient. Two passes instead of
// atomics, so the result is the same on every run: pass 1 gives each (column strip, row chunk) block
// a partial sum in a fixed order; pass 2 adds the chunks' partials in chunk order, one thread per column.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/check.hpp"
#include "backend/cuda/launch.cuh"

namespace zt::backend::cuda {

constexpr int kColumnStrip = 32;       // one warp across 32 adjacent columns: coalesced row reads
constexpr int kRowLanes = 8;           // 8 warps per block walk the chunk's rows with stride 8
constexpr std::int64_t kChunkRows = 128;  // rows per partial at least: 16 per thread, and N/128 chunks of parallelism
constexpr std::int64_t kMaxChunks = 1024;  // beyond 128 x 1024 rows the chunks grow instead: pass 2 stays short
                                           // and the grid's y within its limit (head_rmsnorm's tokens x heads rows)

template <int kOut>
struct ColumnOutputs {
  float* ptr[kOut];
};

// Rows per chunk for N rows: a function of N alone, so a shape's sums repeat bit for bit.
inline std::int64_t column_chunk_rows(std::int64_t N) {
  const std::int64_t spread = (N + kMaxChunks - 1) / kMaxChunks;
  return spread > kChunkRows ? spread : kChunkRows;
}
inline std::int64_t column_chunks(std::int64_t N) { return (N + column_chunk_rows(N) - 1) / column_chunk_rows(N); }

// fp32 scratch bytes column_sums_accumulate needs for N rows of C columns.
inline std::size_t column_sums_scratch_bytes(std::int64_t N, std::int64_t C, int outputs) {
  return static_cast<std::size_t>(column_chunks(N) * C * outputs) * sizeof(float);
}

// Block (kColumnStrip, kRowLanes) owns columns [blockIdx.x*32, +32) and rows [blockIdx.y*chunk_rows, +chunk_rows);
// partial[k][chunk][c] = sum over the chunk's rows of term(n, c)[k], lanes folded in lane order.
template <int kOut, typename Term>
__global__ void column_partials_kernel(Term term, std::int64_t N, std::int64_t C, std::int64_t chunk_rows,
                                       float* partial) {
  __shared__ float lanes[kOut][kRowLanes][kColumnStrip];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColumnStrip + threadIdx.x;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * chunk_rows;
  const std::int64_t row1 = row0 + chunk_rows < N ? row0 + chunk_rows : N;
  float acc[kOut] = {};
  if (c < C)
    for (std::int64_t n = row0 + threadIdx.y; n < row1; n += kRowLanes) term(n, c, acc);
  for (int k = 0; k < kOut; ++k) lanes[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    const std::int64_t chunks = gridDim.y;
    for (int k = 0; k < kOut; ++k) {
      float s = 0.0f;
      for (int y = 0; y < kRowLanes; ++y) s += lanes[k][y][threadIdx.x];
      partial[(k * chunks + blockIdx.y) * C + c] = s;
    }
  }
}

// dst[k][c] += sum over chunks, in chunk order, of partial[k][chunk][c]. One thread per (k, c).
template <int kOut>
__global__ void column_finish_kernel(ColumnOutputs<kOut> dst, const float* partial, std::int64_t chunks,
                                     std::int64_t C) {
  for (std::int64_t i = grid_start(); i < kOut * C; i += grid_step()) {
    const std::int64_t k = i / C, c = i % C;
    float s = 0.0f;
    for (std::int64_t j = 0; j < chunks; ++j) s += partial[(k * chunks + j) * C + c];
    dst.ptr[k][c] += s;
  }
}

// Term: a device functor `void operator()(std::int64_t n, std::int64_t c, float (&acc)[kOut]) const`
// adding row n's terms for column c. `scratch` holds column_sums_scratch_bytes(N, C, kOut) bytes.
template <int kOut, typename Term>
void column_sums_accumulate(const Term& term, std::int64_t N, std::int64_t C, ColumnOutputs<kOut> dst,
                            float* scratch, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  const std::int64_t chunks = column_chunks(N);  // at most kMaxChunks: within the grid's y limit
  const dim3 grid(static_cast<unsigned>((C + kColumnStrip - 1) / kColumnStrip), static_cast<unsigned>(chunks));
  column_partials_kernel<kOut, Term><<<grid, dim3(kColumnStrip, kRowLanes), 0, stream>>>(term, N, C,
                                                                                        column_chunk_rows(N), scratch);
  ZT_CUDA_LAUNCH_CHECK();
  column_finish_kernel<kOut><<<grid_stride_blocks(kOut * C), kBlockThreads, 0, stream>>>(dst, scratch, chunks, C);
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::backend::cuda
