// Building blocks of the flash-attention kernels (attention_kernels.cuh): the tile geometry, the
// global -> shared tile loader, and one warp's matrix products on shared-memory tiles in two flavours:
// tensor cores (nvcuda::wmma, bf16/f16 operands, fp32 accumulators) and CUDA cores (f32).
#pragma once

#include <mma.h>

#include <cstdint>
#include <cstring>

#include "backend/cuda/dtype_io.cuh"

namespace zt::backend::cuda::attn {

// Every product works on tiles of 64 rows of the streamed side (keys in forward and dQ, queries in
// dK/dV): 64 x 64 is the tile FlashAttention-2 uses for head size 64. A warp owns 16 rows of the
// block's own side (one wmma row of fragments); with 16 rows a warp its fp32 accumulators for hs=128
// stay at 64 registers a thread. How many warps a block has, and how many buffers of the streamed
// tiles it cycles through, is the kernel's Blocking (attention_kernels.cuh).
constexpr int kTile = 64;
constexpr int kWarpRows = 16;

// Score tiles [16][kTile] fp32, one per warp. The row stride is 4 floats past the width: wmma needs a
// multiple of 4 floats (16 bytes), and +4 puts consecutive rows 4 banks apart, so the float4 row reads
// of the softmax (8 rows per quarter-warp) hit 32 distinct banks.
constexpr int kLdS = kTile + 4;
constexpr std::size_t kWarpScoreBytes = kWarpRows * kLdS * sizeof(float);

// Head sizes are compiled in steps (16, 32, 64, 128); a head of hs columns runs in the smallest step
// >= hs with the columns past hs zero in shared memory (they add nothing to Q K^T, and the outputs
// past hs are not stored). hs must be a multiple of 8 so that 16-byte chunks never straddle hs.
__host__ __device__ constexpr int padded_head_size(int hs) {
  return hs <= 16 ? 16 : hs <= 32 ? 32 : hs <= 64 ? 64 : 128;
}
constexpr int kMaxHeadSize = 128;

// Tile row stride in elements: 16 bytes past the padded head (row starts stay 16-byte aligned for the
// vector loads and 32-byte aligned every 16 rows for wmma, and rows fall 4 banks apart).
template <typename T, int HSP>
__host__ __device__ constexpr int tile_ld() {
  return HSP + static_cast<int>(16 / sizeof(T));
}
template <typename T, int HSP>
__host__ __device__ constexpr std::size_t tile_bytes(int rows = kTile) {
  return static_cast<std::size_t>(rows) * tile_ld<T, HSP>() * sizeof(T);
}

// ---- global -> shared ------------------------------------------------------------------------------

// cp.async (sm_80+): 16 or 4 bytes global -> shared without passing through registers, so a block
// issues the next tile's copies and computes on the current one while they fly. A thread's copies
// complete in commit groups: wait_group<N> waits until at most N of its groups are pending; a
// __syncthreads after it makes every thread's copies visible to the block.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Starts dst[r][c] (row stride tile_ld) = src[r * src_ld + c] for r < rows, c < hs; zero elsewhere up
// to Rows x HSP (zeros matter: padded keys meet masked probabilities, and 0 * garbage could be NaN).
// vec: src and src_ld allow 16-byte copies (decided once on the host), issued as cp.async; otherwise
// element by element through registers. Either way the tile is complete for the block after this
// thread's cp_async_commit + cp_async_wait_all and a __syncthreads (the zeros and the element path
// are plain shared stores, which that barrier publishes too).
template <typename T, int HSP, int Rows, int Threads>
__device__ __forceinline__ void issue_tile(T* dst, const T* src, std::int64_t src_ld, int rows, int hs, bool vec) {
  constexpr int kLd = tile_ld<T, HSP>();
  constexpr int kChunk = 16 / sizeof(T);  // elements a 16-byte vector
  constexpr int kChunksPerRow = HSP / kChunk;
  if (vec) {
    for (int i = threadIdx.x; i < Rows * kChunksPerRow; i += Threads) {
      const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * kChunk;
      if (r < rows && c < hs)
        cp_async16(dst + r * kLd + c, src + r * src_ld + c);
      else
        *reinterpret_cast<int4*>(dst + r * kLd + c) = make_int4(0, 0, 0, 0);
    }
  } else {
    for (int i = threadIdx.x; i < Rows * HSP; i += Threads) {
      const int r = i / HSP, c = i % HSP;
      dst[r * kLd + c] = (r < rows && c < hs) ? src[r * src_ld + c] : from_f32<T>(0.0f);
    }
  }
}

// ---- one row's 32 consecutive scores between fp32 registers and shared memory ----------------------

__device__ __forceinline__ void read_row32(float (&v)[32], const float* src) {
#pragma unroll
  for (int j = 0; j < 32; j += 4) {
    const float4 f = *reinterpret_cast<const float4*>(src + j);
    v[j] = f.x, v[j + 1] = f.y, v[j + 2] = f.z, v[j + 3] = f.w;
  }
}

__device__ __forceinline__ std::uint32_t pack2(float a, float b, __nv_bfloat16) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  std::uint32_t u;
  memcpy(&u, &h, sizeof(u));
  return u;
}
__device__ __forceinline__ std::uint32_t pack2(float a, float b, __half) {
  const __half2 h = __floats2half2_rn(a, b);
  std::uint32_t u;
  memcpy(&u, &h, sizeof(u));
  return u;
}

// dst[0..32) = v rounded to T (nearest even), in 16-byte stores (dst 16-byte aligned).
template <typename T>
__device__ __forceinline__ void write_row32(T* dst, const float (&v)[32]) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int j = 0; j < 32; j += 4)
      *reinterpret_cast<float4*>(dst + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
  } else {
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
      const uint4 u = make_uint4(pack2(v[j], v[j + 1], T{}), pack2(v[j + 2], v[j + 3], T{}),
                                 pack2(v[j + 4], v[j + 5], T{}), pack2(v[j + 6], v[j + 7], T{}));
      *reinterpret_cast<uint4*>(dst + j) = u;
    }
  }
}

// ---- one warp's products on shared-memory tiles ----------------------------------------------------
// Both flavours offer the same operations on a warp's fp32 accumulator tile Acc [16][HSP]:
//   scores(S, A, B)        S[16][kTile] fp32 (ld kLdS) = A[16][HSP] . B[kTile][HSP]^T  (A, B tiles of T)
//   accumulate(acc, P, B)  acc += P[16][kTile] (T, ld kLdP) . B[kTile][HSP]
//   scale_rows(acc, f)     acc[r][:] *= f[r] (f: 16 floats in shared memory)
//   write(acc, staging, fn) calls fn(r, c, acc[r][c]) for every r < 16, c < HSP, consecutive lanes on
//                          consecutive c (coalesced stores); staging: the warp's kWarpScoreBytes.
// P is written in place over the score tile S it came from (kLdP * sizeof(T) <= kLdS * 4).

// Tensor cores: 16x16x16 wmma fragments. The fragment element layout is unspecified, so the softmax
// runs on the shared-memory copy of S; rescaling the accumulator rows in registers uses the row of
// each element, found once by loading a matrix of row numbers into an accumulator fragment (a load
// places every element where mma_sync and store_matrix_sync expect it, whatever the layout).
template <typename T, int HSP>
struct WmmaTile {
  using Elem = T;
  static constexpr int kHsp = HSP;
  static constexpr int kLd = tile_ld<T, HSP>();
  static constexpr int kLdP = kTile + 8;  // wmma: a multiple of 8 halves; rows 4 banks apart
  static constexpr int kFrags = HSP / 16;
  using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T, nvcuda::wmma::row_major>;
  using FragB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, T, nvcuda::wmma::row_major>;
  using FragBt = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, T, nvcuda::wmma::col_major>;
  using FragC = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;
  static_assert(kLdP * sizeof(T) <= kLdS * sizeof(float), "P fits in place of its score tile");

  struct Acc {
    FragC f[kFrags];
    int row[FragC::num_elements];  // row of the tile that element i of every fragment belongs to
  };

  __device__ static void init(Acc& acc, float* staging) {
    const int lane = threadIdx.x % 32;
    for (int i = lane; i < 16 * 16; i += 32) staging[(i / 16) * kLdS + i % 16] = static_cast<float>(i / 16);
    __syncwarp();
    FragC rows;
    nvcuda::wmma::load_matrix_sync(rows, staging, kLdS, nvcuda::wmma::mem_row_major);
#pragma unroll
    for (int i = 0; i < FragC::num_elements; ++i) acc.row[i] = static_cast<int>(rows.x[i]);
#pragma unroll
    for (int n = 0; n < kFrags; ++n) nvcuda::wmma::fill_fragment(acc.f[n], 0.0f);
    __syncwarp();
  }

  // Up to hs 64 the A fragments stay in registers across the 4 column blocks; at 128 they would take
  // 32 registers next to 64 of accumulators, so the 4 column blocks' accumulators stay instead.
  __device__ static void scores(float* S, const T* A, const T* B) {
    if constexpr (kFrags <= 4)
      scores_keep_a(S, A, B);
    else
      scores_keep_c(S, A, B);
  }

  __device__ static void scores_keep_a(float* S, const T* A, const T* B) {
    FragA a[kFrags];
#pragma unroll
    for (int k = 0; k < kFrags; ++k) nvcuda::wmma::load_matrix_sync(a[k], A + k * 16, kLd);
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) {
      FragC c;
      nvcuda::wmma::fill_fragment(c, 0.0f);
#pragma unroll
      for (int k = 0; k < kFrags; ++k) {
        FragBt b;  // B^T: the row-major [n][d] tile read column-major
        nvcuda::wmma::load_matrix_sync(b, B + n * 16 * kLd + k * 16, kLd);
        nvcuda::wmma::mma_sync(c, a[k], b, c);
      }
      nvcuda::wmma::store_matrix_sync(S + n * 16, c, kLdS, nvcuda::wmma::mem_row_major);
    }
  }

  __device__ static void scores_keep_c(float* S, const T* A, const T* B) {
    FragC c[kTile / 16];
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) nvcuda::wmma::fill_fragment(c[n], 0.0f);
#pragma unroll
    for (int k = 0; k < kFrags; ++k) {
      FragA a;
      nvcuda::wmma::load_matrix_sync(a, A + k * 16, kLd);
#pragma unroll
      for (int n = 0; n < kTile / 16; ++n) {
        FragBt b;
        nvcuda::wmma::load_matrix_sync(b, B + n * 16 * kLd + k * 16, kLd);
        nvcuda::wmma::mma_sync(c[n], a, b, c[n]);
      }
    }
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n)
      nvcuda::wmma::store_matrix_sync(S + n * 16, c[n], kLdS, nvcuda::wmma::mem_row_major);
  }

  __device__ static void accumulate(Acc& acc, const T* P, const T* B) {
#pragma unroll
    for (int k = 0; k < kTile / 16; ++k) {
      FragA a;
      nvcuda::wmma::load_matrix_sync(a, P + k * 16, kLdP);
#pragma unroll
      for (int n = 0; n < kFrags; ++n) {
        FragB b;
        nvcuda::wmma::load_matrix_sync(b, B + k * 16 * kLd + n * 16, kLd);
        nvcuda::wmma::mma_sync(acc.f[n], a, b, acc.f[n]);
      }
    }
  }

  __device__ static void scale_rows(Acc& acc, const float* factor) {
    float f[FragC::num_elements];
#pragma unroll
    for (int i = 0; i < FragC::num_elements; ++i) f[i] = factor[acc.row[i]];
#pragma unroll
    for (int n = 0; n < kFrags; ++n)
#pragma unroll
      for (int i = 0; i < FragC::num_elements; ++i) acc.f[n].x[i] *= f[i];
  }

  // Through the staging tile 64 columns (4 fragments) at a time.
  template <typename F>
  __device__ static void write(const Acc& acc, float* staging, F&& fn) {
    constexpr int kCols = HSP < kTile ? HSP : kTile;
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int c0 = 0; c0 < HSP; c0 += kCols) {
      __syncwarp();
#pragma unroll
      for (int n = 0; n < kCols / 16; ++n)
        nvcuda::wmma::store_matrix_sync(staging + n * 16, acc.f[c0 / 16 + n], kLdS, nvcuda::wmma::mem_row_major);
      __syncwarp();
      for (int i = lane; i < 16 * kCols; i += 32)
        fn(i / kCols, c0 + i % kCols, staging[(i / kCols) * kLdS + i % kCols]);
    }
    __syncwarp();
  }
};

// CUDA cores, f32 (train.precision=fp32). The layouts are ours: in scores a lane owns key columns
// lane and lane+32 of all 16 rows; in the accumulator it owns head columns lane + 32 i.
template <int HSP>
struct SimtTile {
  using Elem = float;
  static constexpr int kHsp = HSP;
  static constexpr int kLd = tile_ld<float, HSP>();
  static constexpr int kLdP = kLdS;
  static constexpr int kColsPerLane = (HSP + 31) / 32;

  struct Acc {
    float v[kWarpRows][kColsPerLane];
  };

  __device__ static void init(Acc& acc, float*) {
#pragma unroll
    for (int r = 0; r < kWarpRows; ++r)
#pragma unroll
      for (int i = 0; i < kColsPerLane; ++i) acc.v[r][i] = 0.0f;
  }

  // float4 reads along d: A rows are broadcast; B rows lane and lane+32 fall in distinct banks per
  // quarter-warp (row stride = 4 or 20 banks mod 32).
  __device__ static void scores(float* S, const float* A, const float* B) {
    const int lane = threadIdx.x % 32;
    float s0[kWarpRows] = {}, s1[kWarpRows] = {};
#pragma unroll 2
    for (int d = 0; d < HSP; d += 4) {
      const float4 b0 = *reinterpret_cast<const float4*>(B + lane * kLd + d);
      const float4 b1 = *reinterpret_cast<const float4*>(B + (lane + 32) * kLd + d);
#pragma unroll
      for (int r = 0; r < kWarpRows; ++r) {
        const float4 a = *reinterpret_cast<const float4*>(A + r * kLd + d);
        s0[r] += a.x * b0.x + a.y * b0.y + a.z * b0.z + a.w * b0.w;
        s1[r] += a.x * b1.x + a.y * b1.y + a.z * b1.z + a.w * b1.w;
      }
    }
#pragma unroll
    for (int r = 0; r < kWarpRows; ++r) {
      S[r * kLdS + lane] = s0[r];
      S[r * kLdS + lane + 32] = s1[r];
    }
  }

  __device__ static void accumulate(Acc& acc, const float* P, const float* B) {
    const int lane = threadIdx.x % 32;
    if (HSP < 32 && lane >= HSP) return;  // no column for this lane (HSP = 16)
#pragma unroll 2
    for (int k = 0; k < kTile; k += 4) {
      float b[4][kColsPerLane];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int i = 0; i < kColsPerLane; ++i) b[kk][i] = B[(k + kk) * kLd + lane + 32 * i];
#pragma unroll
      for (int r = 0; r < kWarpRows; ++r) {
        const float4 p = *reinterpret_cast<const float4*>(P + r * kLdP + k);
#pragma unroll
        for (int i = 0; i < kColsPerLane; ++i)
          acc.v[r][i] += p.x * b[0][i] + p.y * b[1][i] + p.z * b[2][i] + p.w * b[3][i];
      }
    }
  }

  __device__ static void scale_rows(Acc& acc, const float* factor) {
#pragma unroll
    for (int r = 0; r < kWarpRows; ++r) {
      const float f = factor[r];
#pragma unroll
      for (int i = 0; i < kColsPerLane; ++i) acc.v[r][i] *= f;
    }
  }

  template <typename F>
  __device__ static void write(const Acc& acc, float*, F&& fn) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < kWarpRows; ++r)
#pragma unroll
      for (int i = 0; i < kColsPerLane; ++i)
        if (lane + 32 * i < HSP) fn(r, lane + 32 * i, acc.v[r][i]);
  }
};

}  // namespace zt::backend::cuda::attn
