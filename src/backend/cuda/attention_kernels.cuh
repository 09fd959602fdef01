// The causal flash-attention kernels (FlashAttention-2 loop order, Dao 2023), templated on a warp
// tile flavour M from attention_tiles.cuh (tensor cores for bf16/f16, CUDA cores for f32).
// Blocks: kThreads threads on one (batch, head) and one 64-row tile; each warp owns 16 of the rows.
// Scores live in the log2 domain: s2 = s * scale * log2(e), so every exponential is one exp2f.
// With segment starts (the document mask) a query's keys before its sample start are masked like the
// causal ones after it; the tile loops are unchanged (a masked tile costs its scores, adds nothing).
#pragma once

#include <cmath>

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

// Forward, one block per (query tile, b*NH + h). Online softmax per query row (running max m and sum
// l, both fp32) over key tiles 0..the diagonal; tiles past the diagonal are fully masked and skipped.
// The softmax works on the warp's shared-memory score tile: lane (r = lane % 16, half = lane / 16)
// owns row r, key columns [32 half, 32 half + 32); the row's two lanes combine with one shuffle.
// out = acc / l (rounded to T), lse = m ln2 + ln l (fp32).
// Shared memory: Q, K, V tiles [64][HSP + 16B] of T, 4 warp score tiles [16][68] f32, 4 x 16 row
// factors: 44.3 KiB for bf16/f16 hs 64 (4 blocks/SM), 68.3 KiB at hs 128, 68.3 / 116.3 KiB f32.
template <typename M>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(Args<typename M::Elem> a) {
  using T = typename M::Elem;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + kTile * M::kLd;
  T* sV = sK + kTile * M::kLd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sS = reinterpret_cast<float*>(sV + kTile * M::kLd) + warp * kWarpRows * kLdS;
  float* sRow = reinterpret_cast<float*>(sV + kTile * M::kLd) + kWarps * kWarpRows * kLdS + warp * kWarpRows;
  T* sP = reinterpret_cast<T*>(sS);

  const int T_ = a.T_, C = a.C, W = a.W;
  const std::int64_t bh = blockIdx.x, b = bh / a.NH;
  const int h = static_cast<int>(bh % a.NH), kvh = kv_head_of(a, h);
  const int qt = gridDim.y - 1 - blockIdx.y;  // the longest rows (most key tiles) start first
  const int q0 = qt * kTile;
  const T* row_base = a.qkv + b * T_ * static_cast<std::int64_t>(W);
  const T* q_base = row_base + q_col(a, h);
  const T* k_base = row_base + k_col(a, kvh);
  const T* v_base = row_base + v_col(a, kvh);
  load_tile<T, M::kHsp>(sQ, q_base + q0 * static_cast<std::int64_t>(W), W, T_ - q0, a.hs, a.vec);

  typename M::Acc acc;
  M::init(acc, sS);
  const int r = lane % 16, half = lane / 16;
  const int qrow = q0 + warp * kWarpRows + r;
  const int last_key = min(qrow, T_ - 1);  // causal; padding rows past T see the real keys only
  const int first_key = a.starts ? a.starts[b * T_ + last_key] : 0;  // document mask: the row's sample
  const float c = a.scale * kLog2e;
  float m = -INFINITY, l = 0.0f;  // l: this lane's half of the row sum, scaled to the running max

  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();  // the previous tile's K, V (and this warp's P) are no longer read
    load_tile<T, M::kHsp>(sK, k_base + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
    load_tile<T, M::kHsp>(sV, v_base + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
    __syncthreads();
    M::scores(sS, sQ + warp * kWarpRows * M::kLd, sK);
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
    M::accumulate(acc, sP, sV);
  }

  l += __shfl_xor_sync(0xffffffffu, l, 16);
  __syncwarp();  // sRow and the P tile are no longer read
  if (half == 0) {
    sRow[r] = 1.0f / l;
    if (qrow < T_) a.lse[bh * T_ + qrow] = m * kLn2 + logf(l);
  }
  __syncwarp();
  M::scale_rows(acc, sRow);
  T* o = a.o + b * T_ * static_cast<std::int64_t>(C) + h * a.hs;
  const int row0 = q0 + warp * kWarpRows;
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

// dQ, one block per (query tile, b*NH + h), parallel over query tiles and looping over the key tiles
// up to the diagonal (recomputing S and dP, which the dK/dV kernel also computes: the price of
// writing dQ once, in a fixed order, with no atomics; the backward is deterministic).
//   dQ = scale * sum_k dS K,  dS = P * (dO V^T - D),  P = exp(scale Q K^T - lse)
// Shared memory: Q, dO, K, V tiles + 4 warps x (S, dP) fp32: 70 KiB bf16/f16 hs 64 (3 blocks/SM),
// 102 KiB at hs 128, 102 / 166 KiB f32.
template <typename M>
__global__ void __launch_bounds__(kThreads) attention_backward_dq_kernel(Args<typename M::Elem> a) {
  using T = typename M::Elem;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sdO = sQ + kTile * M::kLd;
  T* sK = sdO + kTile * M::kLd;
  T* sV = sK + kTile * M::kLd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sS = reinterpret_cast<float*>(sV + kTile * M::kLd) + warp * kWarpRows * kLdS;
  float* sDP = sS + kWarps * kWarpRows * kLdS;

  const int T_ = a.T_, C = a.C, W = a.W;
  const std::int64_t bh = blockIdx.x, b = bh / a.NH;
  const int h = static_cast<int>(bh % a.NH), kvh = kv_head_of(a, h);
  const int qt = gridDim.y - 1 - blockIdx.y;
  const int q0 = qt * kTile;
  const T* row_base = a.qkv + b * T_ * static_cast<std::int64_t>(W);
  const T* q_base = row_base + q_col(a, h);
  const T* k_base = row_base + k_col(a, kvh);
  const T* v_base = row_base + v_col(a, kvh);
  const T* do_base = a.dout + b * T_ * static_cast<std::int64_t>(C) + h * a.hs;
  load_tile<T, M::kHsp>(sQ, q_base + q0 * static_cast<std::int64_t>(W), W, T_ - q0, a.hs, a.vec);
  load_tile<T, M::kHsp>(sdO, do_base + q0 * static_cast<std::int64_t>(C), C, T_ - q0, a.hs, a.vec);

  typename M::Acc acc;
  M::init(acc, sS);
  const int row0 = q0 + warp * kWarpRows;
  const int qrow = row0 + lane % 16;
  const float c = a.scale * kLog2e;
  const float lse2 = qrow < T_ ? a.lse_in[bh * T_ + qrow] * kLog2e : 0.0f;
  const float D = qrow < T_ ? a.D[bh * T_ + qrow] : 0.0f;
  const int first_key = a.starts && qrow < T_ ? a.starts[b * T_ + qrow] : 0;

  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();
    load_tile<T, M::kHsp>(sK, k_base + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
    load_tile<T, M::kHsp>(sV, v_base + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
    __syncthreads();
    M::scores(sS, sQ + warp * kWarpRows * M::kLd, sK);
    M::scores(sDP, sdO + warp * kWarpRows * M::kLd, sV);
    __syncwarp();
    probabilities_and_grads<M>(
        sS, sDP, false, c, [&](int, int col) { return qrow < T_ && k0 + col <= qrow && k0 + col >= first_key; },
        [&](int, int, float& l2, float& d) { l2 = lse2, d = D; });
    M::accumulate(acc, reinterpret_cast<const T*>(sDP), sK);
  }

  T* dq = a.dqkv + b * T_ * static_cast<std::int64_t>(W) + q_col(a, h);
  M::write(acc, sS, [&](int rr, int cc, float v) {
    if (row0 + rr < T_ && cc < a.hs) dq[(row0 + rr) * static_cast<std::int64_t>(W) + cc] = from_f32<T>(v * a.scale);
  });
}

// dK and dV, one block per (key tile, b*NKV + K/V head), looping over the query heads that share the
// K/V head (in head order) and, for each, over the query tiles from the diagonal on. A K/V head's
// gradient is the sum over its query group, so one block owning it sums the group in a fixed order:
// deterministic without atomics (for NKV = NH, a group of one is multi-head attention's loop).
// Each warp owns 16 keys and works on transposed tiles (keys x queries), so its products are again
// [16][64] . [64][HSP]:
//   S^T = K Q^T,  dP^T = V dO^T,  P^T = exp(scale S^T - lse),  dS^T = P^T * (dP^T - D)
//   dV = sum_h sum_q P^T dO,  dK = scale * sum_h sum_q dS^T Q
// Shared memory: K, V, Q, dO tiles + 4 warps x (S^T, dP^T) fp32 + lse, D of the query tile:
// 70.5 KiB bf16/f16 hs 64 (3 blocks/SM), 102.5 KiB at hs 128, 102.5 / 166.5 KiB f32.
template <typename M>
__global__ void __launch_bounds__(kThreads) attention_backward_dkdv_kernel(Args<typename M::Elem> a) {
  using T = typename M::Elem;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem);
  T* sV = sK + kTile * M::kLd;
  T* sQ = sV + kTile * M::kLd;
  T* sdO = sQ + kTile * M::kLd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sScores = reinterpret_cast<float*>(sdO + kTile * M::kLd);
  float* sS = sScores + warp * kWarpRows * kLdS;
  float* sDP = sS + kWarps * kWarpRows * kLdS;
  float* sLse2 = sScores + 2 * kWarps * kWarpRows * kLdS;
  float* sD = sLse2 + kTile;

  const int T_ = a.T_, C = a.C, W = a.W, group = a.NH / a.NKV;
  const std::int64_t bkv = blockIdx.x, b = bkv / a.NKV;
  const int kvh = static_cast<int>(bkv % a.NKV);
  const int kt = blockIdx.y;  // the first key tiles meet the most queries: they start first
  const int k0 = kt * kTile;
  const T* row_base = a.qkv + b * T_ * static_cast<std::int64_t>(W);
  load_tile<T, M::kHsp>(sK, row_base + k_col(a, kvh) + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);
  load_tile<T, M::kHsp>(sV, row_base + v_col(a, kvh) + k0 * static_cast<std::int64_t>(W), W, T_ - k0, a.hs, a.vec);

  typename M::Acc dk, dv;
  M::init(dk, sS);
  M::init(dv, sS);
  const int row0 = k0 + warp * kWarpRows;
  const int krow = row0 + lane % 16;
  const float c = a.scale * kLog2e;
  const int n_tiles = (T_ + kTile - 1) / kTile;

  for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
    const std::int64_t bh = b * a.NH + h;
    const T* q_base = row_base + q_col(a, h);
    const T* do_base = a.dout + b * T_ * static_cast<std::int64_t>(C) + h * a.hs;
    for (int qt = kt; qt < n_tiles; ++qt) {
      const int q0 = qt * kTile;
      __syncthreads();
      load_tile<T, M::kHsp>(sQ, q_base + q0 * static_cast<std::int64_t>(W), W, T_ - q0, a.hs, a.vec);
      load_tile<T, M::kHsp>(sdO, do_base + q0 * static_cast<std::int64_t>(C), C, T_ - q0, a.hs, a.vec);
      for (int i = threadIdx.x; i < kTile; i += kThreads) {
        const bool in = q0 + i < T_;
        sLse2[i] = in ? a.lse_in[bh * T_ + q0 + i] * kLog2e : 0.0f;
        sD[i] = in ? a.D[bh * T_ + q0 + i] : 0.0f;
      }
      __syncthreads();
      M::scores(sS, sK + warp * kWarpRows * M::kLd, sQ);
      M::scores(sDP, sV + warp * kWarpRows * M::kLd, sdO);
      __syncwarp();
      probabilities_and_grads<M>(
          sS, sDP, true, c,
          [&](int, int col) {
            return q0 + col < T_ && q0 + col >= krow && (!a.starts || krow >= a.starts[b * T_ + q0 + col]);
          },
          [&](int, int col, float& l2, float& d) { l2 = sLse2[col], d = sD[col]; });
      M::accumulate(dv, reinterpret_cast<const T*>(sS), sdO);
      M::accumulate(dk, reinterpret_cast<const T*>(sDP), sQ);
    }
  }

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
