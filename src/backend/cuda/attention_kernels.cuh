// The causal flash-attention kernels (FlashAttention-2 loop order, Dao 2023), templated on a warp
// tile flavour M from attention_tiles.cuh (tensor cores for bf16/f16, CUDA cores for f32).
// Blocks: G::kThreads threads on one (batch, head) and G::kRows rows of its own side; each warp owns
// 16 of the rows and walks the 64-row tiles of the other side in the same order as every other
// geometry would (a row's sequence of operations does not depend on the block it sits in). Measured on
// an H200 (2026-11-27, 33 shapes): out bitwise equal to the earlier 4-warp kernels, lse different in
// the last bits (nvcc contracts m ln2 + ln l into an fma or not depending on the surrounding code), and
// dQKV through it; run to run every kernel is bitwise repeatable (gpu tests). The streamed tiles
// arrive by cp.async into G::kStages buffers: with 2, tile i+1 is copied while tile i is computed on.
// Scores live in the log2 domain: s2 = s * scale * log2(e), so every exponential is one exp2f.
// With segment starts (the document mask) a query's keys before its sample start are masked like the
// causal ones after it; the tile loops are unchanged (a masked tile costs its scores, adds nothing).
#pragma once

#include <cmath>
#include <type_traits>

#include "backend/cuda/attention_tiles.cuh"

namespace zt::backend::cuda::attn {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// One attention call's pointers and sizes. qkv, out and dqkv rows: [B,T,W], [B,T,C], [B,T,W].
template <typename T>
struct Args {
  const T* qkv;
  const T* out;   // backward
  const T* dout;  // backward
  T* o;           // forward: out written
  T* dqkv;        // backward: written
  float* lse;     // [B,NH,T]
  const float* lse_in;
  float* D;  // [B,NH,T] scratch: rowsum(dO * O)
  const std::int32_t* starts;  // [B,T] first key of each query (document mask), or null: 0
  int B, T_, C, NH, hs;
  int NKV;      // K/V heads (NKV divides NH; NKV = NH is multi-head attention)
  int W;        // qkv and dqkv row width: C + 2 NKV hs
  float scale;  // 1/sqrt(hs)
  bool vec;     // every row start 16-byte aligned: tiles load with 16-byte vectors
};

// Column offsets in a qkv (or dqkv) row of query head h's q, and of K/V head kvh's k and v.
template <typename T>
__device__ __forceinline__ int q_col(const Args<T>& a, int h) { return h * a.hs; }
template <typename T>
__device__ __forceinline__ int k_col(const Args<T>& a, int kvh) { return a.C + kvh * a.hs; }
template <typename T>
__device__ __forceinline__ int v_col(const Args<T>& a, int kvh) { return a.C + (a.NKV + kvh) * a.hs; }
// The K/V head query head h reads (Hugging Face repeat_kv: consecutive query heads share one).
template <typename T>
__device__ __forceinline__ int kv_head_of(const Args<T>& a, int h) { return h / (a.NH / a.NKV); }

// A kernel's block: Warps warps over 16 Warps rows, cycling through Stages buffers (1 or 2) of the
// streamed tiles; MinBlocks blocks an SM bound the registers a thread (__launch_bounds__; 0: no bound).
template <int Warps, int Stages, int MinBlocks>
struct Blocking {
  static constexpr int kMinBlocks = MinBlocks;
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kRows = Warps * kWarpRows;
  static constexpr int kStages = Stages;
  static_assert(Stages == 1 || Stages == 2, "one buffer, or two in turn");
};

// Two blocks fit an SM (sm_90: 228 KiB of shared memory an SM, 1 KiB of it reserved per block) up to
// this size; the kernels double-buffer only where that still holds (else one buffer, as before).
constexpr std::size_t kTwoBlocksPerSmBytes = 113 * 1024;

// The pipeline of the streamed tiles, the same in every kernel. issue(i, buffer) starts step i's
// copies into a buffer; compute(i, buffer) works on them. With two buffers, the barrier at the top of
// step i both publishes step i's tile and tells that every warp is done with step i-1's buffer, which
// step i+1's copies then overwrite. With one, a second barrier guards the single buffer.
// Copies the caller issued before (its own side's tiles) join step 0's commit group.
template <typename G, typename Issue, typename Compute>
__device__ __forceinline__ void stream_tiles(int steps, Issue issue, Compute compute) {
  issue(0, 0);
  cp_async_commit();
  for (int i = 0; i < steps; ++i) {
    if constexpr (G::kStages == 1) {
      if (i > 0) {
        __syncthreads();  // every warp is done with step i-1's tile
        issue(i, 0);
        cp_async_commit();
      }
    }
    cp_async_wait_all();  // this thread's copies of step i (the only group in flight) have landed
    __syncthreads();      // everyone's have; step i-1's buffer is no longer read
    if constexpr (G::kStages == 2) {
      if (i + 1 < steps) {
        issue(i + 1, (i + 1) % 2);
        cp_async_commit();
      }
    }
    compute(i, i % G::kStages);
  }
}

// Forward shared memory: Q [kRows][ld], kStages x (K, V) [64][ld] of T, one [16][68] f32 score tile
// and 16 row factors a warp.
template <typename M, typename G>
struct ForwardSmem {
  using T = typename M::Elem;
  static constexpr std::size_t kTileBytes = tile_bytes<T, M::kHsp>();
  static constexpr std::size_t kK = tile_bytes<T, M::kHsp>(G::kRows);
  static constexpr std::size_t kV = kK + G::kStages * kTileBytes;
  static constexpr std::size_t kScores = kV + G::kStages * kTileBytes;
  static constexpr std::size_t kRowFactors = kScores + G::kWarps * kWarpScoreBytes;
  static constexpr std::size_t kBytes = kRowFactors + G::kWarps * kWarpRows * sizeof(float);
};
// 8 warps: each K/V tile serves 128 query rows. bf16/f16: 88.5 KiB at hs 64 (two buffers; 2 blocks/SM,
// so at most 128 registers a thread: 16 warps an SM, was 12), 102.5 KiB at hs 128 (one buffer; ~190
// registers: 1 block/SM, 8 warps as before); f32: 102.5 KiB at hs 64 (one buffer), 166.5 KiB at hs 128
// (one; 1 block/SM), registers unbounded.
template <typename M>
using ForwardBlocking = std::conditional_t<ForwardSmem<M, Blocking<8, 2, 0>>::kBytes <= kTwoBlocksPerSmBytes,
                                           Blocking<8, 2, sizeof(typename M::Elem) == 2 ? 2 : 0>, Blocking<8, 1, 0>>;

// Forward, one block per (query block, b*NH + h). Online softmax per query row (running max m and sum
// l, both fp32) over key tiles 0..the diagonal; tiles past a warp's diagonal are fully masked and
// skipped by that warp (the block loads them for its later warps).
// The softmax works on the warp's shared-memory score tile: lane (r = lane % 16, half = lane / 16)
// owns row r, key columns [32 half, 32 half + 32); the row's two lanes combine with one shuffle.
// out = acc / l (rounded to T), lse = m ln2 + ln l (fp32).
template <typename M, typename G>
__global__ void __launch_bounds__(G::kThreads, G::kMinBlocks) attention_forward_kernel(Args<typename M::Elem> a) {
  using T = typename M::Elem;
  using L = ForwardSmem<M, G>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = reinterpret_cast<T*>(smem + L::kK);
  T* sV = reinterpret_cast<T*>(smem + L::kV);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sS = reinterpret_cast<float*>(smem + L::kScores) + warp * kWarpRows * kLdS;
  float* sRow = reinterpret_cast<float*>(smem + L::kRowFactors) + warp * kWarpRows;
  T* sP = reinterpret_cast<T*>(sS);

  const int T_ = a.T_, C = a.C, W = a.W;
  const std::int64_t bh = blockIdx.x, b = bh / a.NH;
  const int h = static_cast<int>(bh % a.NH), kvh = kv_head_of(a, h);
  const int q0 = (gridDim.y - 1 - blockIdx.y) * G::kRows;  // the longest rows (most key tiles) start first
  const T* row_base = a.qkv + b * T_ * static_cast<std::int64_t>(W);
  const T* q_base = row_base + q_col(a, h);
  const T* k_base = row_base + k_col(a, kvh);
  const T* v_base = row_base + v_col(a, kvh);

  typename M::Acc acc;
  M::init(acc, sS);
  const int r = lane % 16, half = lane / 16;
  const int row0 = q0 + warp * kWarpRows;
  const int qrow = row0 + r;
  const int last_key = min(qrow, T_ - 1);  // causal; padding rows past T see the real keys only
  const int first_key = a.starts ? a.starts[b * T_ + last_key] : 0;  // document mask: the row's sample
  const float c = a.scale * kLog2e;
  float m = -INFINITY, l = 0.0f;  // l: this lane's half of the row sum, scaled to the running max

  // Key tiles up to the block's last row's diagonal (or the last real row's).
  const int n_tiles = min(q0 + G::kRows - 1, T_ - 1) / kTile + 1;
  // Q joins the first key tile's commit group.
  issue_tile<T, M::kHsp, G::kRows, G::kThreads>(sQ, q_base + q0 * static_cast<std::int64_t>(W), W, T_ - q0, a.hs, a.vec);
  auto issue = [&](int kt, int buf) {
    const int k0 = kt * kTile;
    issue_tile<T, M::kHsp, kTile, G::kThreads>(sK + buf * kTile * M::kLd, k_base + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
    issue_tile<T, M::kHsp, kTile, G::kThreads>(sV + buf * kTile * M::kLd, v_base + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
  };
  auto compute = [&](int kt, int buf) {
    const int k0 = kt * kTile;
    if (k0 > row0) return;  // past this warp's diagonal: every key masked (warp-uniform)
    const T* tK = sK + buf * kTile * M::kLd;
    const T* tV = sV + buf * kTile * M::kLd;
    M::scores(sS, sQ + warp * kWarpRows * M::kLd, tK);
    __syncwarp();

    float s[32];
    read_row32(s, sS + r * kLdS + 32 * half);
    const int key0 = k0 + 32 * half;
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      s[j] = key0 + j <= last_key && key0 + j >= first_key ? s[j] * c : -INFINITY;
      tile_max = fmaxf(tile_max, s[j]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
    // -inf only while every key so far lies before the row's sample (document mask): then nothing is
    // accumulated yet, and exp2f(-inf - -inf) would be NaN.
    const float m_new = fmaxf(m, tile_max);
    const bool none_yet = m_new == -INFINITY;
    const float alpha = none_yet ? 1.0f : exp2f(m - m_new);  // 0 on the first tile with a valid key
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      s[j] = none_yet ? 0.0f : exp2f(s[j] - m_new);
      sum += s[j];
    }
    l = l * alpha + sum;
    m = m_new;
    __syncwarp();  // every lane has read its scores before P overwrites the tile
    write_row32(sP + r * M::kLdP + 32 * half, s);
    if (half == 0) sRow[r] = alpha;
    __syncwarp();
    M::scale_rows(acc, sRow);
    M::accumulate(acc, sP, tV);
  };
  stream_tiles<G>(n_tiles, issue, compute);

  l += __shfl_xor_sync(0xffffffffu, l, 16);
  __syncwarp();  // sRow and the P tile are no longer read
  if (half == 0) {
    sRow[r] = 1.0f / l;
    if (qrow < T_) a.lse[bh * T_ + qrow] = m * kLn2 + logf(l);
  }
  __syncwarp();
  M::scale_rows(acc, sRow);
  T* o = a.o + b * T_ * static_cast<std::int64_t>(C) + h * a.hs;
  M::write(acc, sS, [&](int rr, int cc, float v) {
    if (row0 + rr < T_ && cc < a.hs) o[(row0 + rr) * static_cast<std::int64_t>(C) + cc] = from_f32<T>(v);
  });
}

constexpr int kRowDotThreads = 256;

// D[b,h,t] = sum_c dO[b,t,h hs + c] * O[b,t,h hs + c] (fp32), one warp per (b, h, t), lanes along c.
// The dQ and dK/dV kernels both read it, so it is computed once.
template <typename T>
__global__ void __launch_bounds__(kRowDotThreads) attention_row_dot_kernel(Args<T> a) {
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;  // bh*T + t
  const int lane = threadIdx.x % 32;
  if (row >= static_cast<std::int64_t>(a.B) * a.NH * a.T_) return;
  const std::int64_t bh = row / a.T_, t = row % a.T_, b = bh / a.NH, h = bh % a.NH;
  const std::int64_t off = (b * a.T_ + t) * a.C + h * a.hs;
  float sum = 0.0f;
  for (int cc = lane; cc < a.hs; cc += 32) sum += to_f32(a.dout[off + cc]) * to_f32(a.out[off + cc]);
#pragma unroll
  for (int w = 16; w > 0; w /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, w);
  if (lane == 0) a.D[row] = sum;
}

// Rebuilds one lane's 32 probabilities and score gradients from the warp's S and dP tiles (rows x
// columns as the caller's kernel defines them): p = exp2(s2 - lse2), ds = p (dp - D); masked
// entries are 0. Written in place as T: P over S, dS over dP.
template <typename M, typename Valid, typename RowTerms>
__device__ __forceinline__ void probabilities_and_grads(float* sS, float* sDP, bool write_p, float c, Valid valid,
                                                        RowTerms terms) {
  using T = typename M::Elem;
  const int lane = threadIdx.x % 32, r = lane % 16, half = lane / 16;
  float s[32], dp[32];
  read_row32(s, sS + r * kLdS + 32 * half);
  read_row32(dp, sDP + r * kLdS + 32 * half);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    float lse2, D;
    terms(r, 32 * half + j, lse2, D);
    const float p = valid(r, 32 * half + j) ? exp2f(s[j] * c - lse2) : 0.0f;
    s[j] = p;
    dp[j] = p * (dp[j] - D);
  }
  __syncwarp();  // every lane has read before the 16-bit tiles overwrite the fp32 ones
  if (write_p) write_row32(reinterpret_cast<T*>(sS) + r * M::kLdP + 32 * half, s);
  write_row32(reinterpret_cast<T*>(sDP) + r * M::kLdP + 32 * half, dp);
  __syncwarp();
}

// dQ, one block per (query block, b*NH + h), parallel over query blocks and looping over the key
// tiles up to the diagonal (recomputing S and dP, which the dK/dV kernel also computes: the price of
// writing dQ once, in a fixed order, with no atomics; the backward is deterministic).
//   dQ = scale * sum_k dS K,  dS = P * (dO V^T - D),  P = exp(scale Q K^T - lse)
// Shared memory: Q, dO [kRows][ld], kStages x (K, V) [64][ld] of T, and each warp's S, dP tiles f32.
template <typename M, typename G>
struct DqSmem {
  using T = typename M::Elem;
  static constexpr std::size_t kTileBytes = tile_bytes<T, M::kHsp>();
  static constexpr std::size_t kdO = tile_bytes<T, M::kHsp>(G::kRows);
  static constexpr std::size_t kK = 2 * kdO;
  static constexpr std::size_t kV = kK + G::kStages * kTileBytes;
  static constexpr std::size_t kScores = kV + G::kStages * kTileBytes;
  static constexpr std::size_t kBytes = kScores + 2 * G::kWarps * kWarpScoreBytes;
};
// 4 warps (8 would need 140 KiB at hs 64: 1 block/SM). bf16/f16: 88 KiB at hs 64 (two buffers, 2
// blocks/SM, was 3; ~108 registers), 102 KiB at hs 128 (one buffer, 2 blocks/SM); f32: 102 / 166 KiB
// (one; 2 / 1 blocks/SM).
template <typename M>
using DqBlocking = std::conditional_t<DqSmem<M, Blocking<4, 2, 0>>::kBytes <= kTwoBlocksPerSmBytes, Blocking<4, 2, 0>,
                                      Blocking<4, 1, 0>>;

template <typename M, typename G>
__global__ void __launch_bounds__(G::kThreads, G::kMinBlocks) attention_backward_dq_kernel(Args<typename M::Elem> a) {
  using T = typename M::Elem;
  using L = DqSmem<M, G>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sdO = reinterpret_cast<T*>(smem + L::kdO);
  T* sK = reinterpret_cast<T*>(smem + L::kK);
  T* sV = reinterpret_cast<T*>(smem + L::kV);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sS = reinterpret_cast<float*>(smem + L::kScores) + warp * kWarpRows * kLdS;
  float* sDP = sS + G::kWarps * kWarpRows * kLdS;

  const int T_ = a.T_, C = a.C, W = a.W;
  const std::int64_t bh = blockIdx.x, b = bh / a.NH;
  const int h = static_cast<int>(bh % a.NH), kvh = kv_head_of(a, h);
  const int q0 = (gridDim.y - 1 - blockIdx.y) * G::kRows;
  const T* row_base = a.qkv + b * T_ * static_cast<std::int64_t>(W);
  const T* q_base = row_base + q_col(a, h);
  const T* k_base = row_base + k_col(a, kvh);
  const T* v_base = row_base + v_col(a, kvh);
  const T* do_base = a.dout + b * T_ * static_cast<std::int64_t>(C) + h * a.hs;

  typename M::Acc acc;
  M::init(acc, sS);
  const int row0 = q0 + warp * kWarpRows;
  const int qrow = row0 + lane % 16;
  const float c = a.scale * kLog2e;
  const float lse2 = qrow < T_ ? a.lse_in[bh * T_ + qrow] * kLog2e : 0.0f;
  const float D = qrow < T_ ? a.D[bh * T_ + qrow] : 0.0f;
  const int first_key = a.starts && qrow < T_ ? a.starts[b * T_ + qrow] : 0;

  const int n_tiles = min(q0 + G::kRows - 1, T_ - 1) / kTile + 1;  // to the last real row's diagonal
  // Q and dO join the first key tile's commit group.
  issue_tile<T, M::kHsp, G::kRows, G::kThreads>(sQ, q_base + q0 * static_cast<std::int64_t>(W), W, T_ - q0, a.hs, a.vec);
  issue_tile<T, M::kHsp, G::kRows, G::kThreads>(sdO, do_base + q0 * static_cast<std::int64_t>(C), C, T_ - q0, a.hs, a.vec);
  auto issue = [&](int kt, int buf) {
    const int k0 = kt * kTile;
    issue_tile<T, M::kHsp, kTile, G::kThreads>(sK + buf * kTile * M::kLd, k_base + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
    issue_tile<T, M::kHsp, kTile, G::kThreads>(sV + buf * kTile * M::kLd, v_base + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
  };
  auto compute = [&](int kt, int buf) {
    const int k0 = kt * kTile;
    if (k0 > row0) return;  // past this warp's diagonal (warp-uniform)
    const T* tK = sK + buf * kTile * M::kLd;
    M::scores(sS, sQ + warp * kWarpRows * M::kLd, tK);
    M::scores(sDP, sdO + warp * kWarpRows * M::kLd, sV + buf * kTile * M::kLd);
    __syncwarp();
    probabilities_and_grads<M>(
        sS, sDP, false, c, [&](int, int col) { return qrow < T_ && k0 + col <= qrow && k0 + col >= first_key; },
        [&](int, int, float& l2, float& d) { l2 = lse2, d = D; });
    M::accumulate(acc, reinterpret_cast<const T*>(sDP), tK);
  };
  stream_tiles<G>(n_tiles, issue, compute);

  T* dq = a.dqkv + b * T_ * static_cast<std::int64_t>(W) + q_col(a, h);
  M::write(acc, sS, [&](int rr, int cc, float v) {
    if (row0 + rr < T_ && cc < a.hs) dq[(row0 + rr) * static_cast<std::int64_t>(W) + cc] = from_f32<T>(v * a.scale);
  });
}

// dK and dV, one block per (key block, b*NKV + K/V head), looping over the query heads that share the
// K/V head (in head order) and, for each, over the query tiles from the block's first diagonal on. A
// K/V head's gradient is the sum over its query group, so one block owning it sums the group in a
// fixed order: deterministic without atomics (for NKV = NH, a group of one is multi-head attention's
// loop). Each warp owns 16 keys, skips the query tiles before its own diagonal, and works on
// transposed tiles (keys x queries), so its products are again [16][64] . [64][HSP]:
//   S^T = K Q^T,  dP^T = V dO^T,  P^T = exp(scale S^T - lse),  dS^T = P^T * (dP^T - D)
//   dV = sum_h sum_q P^T dO,  dK = scale * sum_h sum_q dS^T Q
// Shared memory: K, V [kRows][ld], kStages x (Q, dO [64][ld] of T, lse, D of the query tile f32), and
// each warp's S^T, dP^T tiles f32.
template <typename M, typename G>
struct DkdvSmem {
  using T = typename M::Elem;
  static constexpr std::size_t kTileBytes = tile_bytes<T, M::kHsp>();
  static constexpr std::size_t kV = tile_bytes<T, M::kHsp>(G::kRows);
  static constexpr std::size_t kQ = 2 * kV;
  static constexpr std::size_t kdO = kQ + G::kStages * kTileBytes;
  static constexpr std::size_t kScores = kdO + G::kStages * kTileBytes;
  static constexpr std::size_t kLse = kScores + 2 * G::kWarps * kWarpScoreBytes;
  static constexpr std::size_t kD = kLse + G::kStages * kTile * sizeof(float);
  static constexpr std::size_t kBytes = kD + G::kStages * kTile * sizeof(float);
};
// 4 warps (8 would need 141 KiB at hs 64: 1 block/SM). bf16/f16: 89 KiB at hs 64 (two buffers, 2
// blocks/SM; ~250 registers allow 2 anyway), 102.5 KiB at hs 128 (one buffer; 255 registers: 2
// blocks/SM); f32: 102.5 / 166.5 KiB (one; 2 / 1).
template <typename M>
using DkdvBlocking = std::conditional_t<DkdvSmem<M, Blocking<4, 2, 0>>::kBytes <= kTwoBlocksPerSmBytes,
                                        Blocking<4, 2, 0>, Blocking<4, 1, 0>>;

template <typename M, typename G>
__global__ void __launch_bounds__(G::kThreads, G::kMinBlocks) attention_backward_dkdv_kernel(Args<typename M::Elem> a) {
  using T = typename M::Elem;
  using L = DkdvSmem<M, G>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem);
  T* sV = reinterpret_cast<T*>(smem + L::kV);
  T* sQ = reinterpret_cast<T*>(smem + L::kQ);
  T* sdO = reinterpret_cast<T*>(smem + L::kdO);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sS = reinterpret_cast<float*>(smem + L::kScores) + warp * kWarpRows * kLdS;
  float* sDP = sS + G::kWarps * kWarpRows * kLdS;
  float* sLse = reinterpret_cast<float*>(smem + L::kLse);  // raw lse; the log2 domain at use
  float* sD = reinterpret_cast<float*>(smem + L::kD);

  const int T_ = a.T_, C = a.C, W = a.W, group = a.NH / a.NKV;
  const std::int64_t bkv = blockIdx.x, b = bkv / a.NKV;
  const int kvh = static_cast<int>(bkv % a.NKV);
  const int k0 = blockIdx.y * G::kRows;  // the first key blocks meet the most queries: they start first
  const T* row_base = a.qkv + b * T_ * static_cast<std::int64_t>(W);

  typename M::Acc dk, dv;
  M::init(dk, sS);
  M::init(dv, sS);
  const int row0 = k0 + warp * kWarpRows;
  const int krow = row0 + lane % 16;
  const float c = a.scale * kLog2e;
  const int n_tiles = (T_ + kTile - 1) / kTile;
  const int first_qt = k0 / kTile;  // the block's first diagonal
  const int per_head = n_tiles - first_qt;

  // K and V join the first step's commit group.
  issue_tile<T, M::kHsp, G::kRows, G::kThreads>(sK, row_base + k_col(a, kvh) + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
  issue_tile<T, M::kHsp, G::kRows, G::kThreads>(sV, row_base + v_col(a, kvh) + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
  // Step i: query head kvh * group + i / per_head, query tile first_qt + i % per_head.
  auto issue = [&](int i, int buf) {
    const int h = kvh * group + i / per_head, q0 = (first_qt + i % per_head) * kTile;
    const std::int64_t bh = b * a.NH + h;
    issue_tile<T, M::kHsp, kTile, G::kThreads>(sQ + buf * kTile * M::kLd, row_base + q_col(a, h) + q0 * static_cast<std::int64_t>(W), W, T_ - q0, a.hs, a.vec);
    issue_tile<T, M::kHsp, kTile, G::kThreads>(sdO + buf * kTile * M::kLd, a.dout + b * T_ * static_cast<std::int64_t>(C) + h * a.hs + q0 * static_cast<std::int64_t>(C), C, T_ - q0, a.hs, a.vec);
    for (int j = threadIdx.x; j < 2 * kTile; j += G::kThreads) {
      const int col = j % kTile;
      float* dst = (j < kTile ? sLse : sD) + buf * kTile + col;
      if (q0 + col < T_)
        cp_async4(dst, (j < kTile ? a.lse_in : a.D) + bh * T_ + q0 + col);
      else
        *dst = 0.0f;
    }
  };
  auto compute = [&](int i, int buf) {
    const int q0 = (first_qt + i % per_head) * kTile;
    if (q0 / kTile < row0 / kTile) return;  // before this warp's diagonal tile (warp-uniform)
    const T* tQ = sQ + buf * kTile * M::kLd;
    const T* tdO = sdO + buf * kTile * M::kLd;
    const float* tLse = sLse + buf * kTile;
    const float* tD = sD + buf * kTile;
    M::scores(sS, sK + warp * kWarpRows * M::kLd, tQ);
    M::scores(sDP, sV + warp * kWarpRows * M::kLd, tdO);
    __syncwarp();
    probabilities_and_grads<M>(
        sS, sDP, true, c,
        [&](int, int col) {
          return q0 + col < T_ && q0 + col >= krow && (!a.starts || krow >= a.starts[b * T_ + q0 + col]);
        },
        // __fmul_rn: the one rounded product the lse tile held before, never fused into the caller's
        [&](int, int col, float& l2, float& d) { l2 = __fmul_rn(tLse[col], kLog2e), d = tD[col]; });
    M::accumulate(dv, reinterpret_cast<const T*>(sS), tdO);
    M::accumulate(dk, reinterpret_cast<const T*>(sDP), tQ);
  };
  stream_tiles<G>(group * per_head, issue, compute);

  T* dkv_rows = a.dqkv + b * T_ * static_cast<std::int64_t>(W);
  T* dk_out = dkv_rows + k_col(a, kvh);
  T* dv_out = dkv_rows + v_col(a, kvh);
  M::write(dk, sS, [&](int rr, int cc, float v) {
    if (row0 + rr < T_ && cc < a.hs) dk_out[(row0 + rr) * static_cast<std::int64_t>(W) + cc] = from_f32<T>(v * a.scale);
  });
  M::write(dv, sS, [&](int rr, int cc, float v) {
    if (row0 + rr < T_ && cc < a.hs) dv_out[(row0 + rr) * static_cast<std::int64_t>(W) + cc] = from_f32<T>(v);
  });
}

}  // namespace zt::backend::cuda::attn
