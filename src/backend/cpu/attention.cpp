// Causal multi-head self-attention, forward and backward, in the flash-attention style (Dao et al. 2022):
// forward keeps only the log-sum-exp of each softmax row; backward rebuilds the probabilities from it.
// Grouped-query attention (Ainslie et al. 2023) reads K/V head h / (NH/NKV) for query head h, as
// Hugging Face's repeat_kv; NKV = NH is GPT-2's multi-head attention.
// Work is cut into query blocks of kBlockQ rows; every block's scores are two sgemms on one thread.
// In mixed precision qkv, out and dout are widened into fp32 scratch (scratch.hpp), the fp32 path runs,
// and out or dqkv is rounded once; lse is f32 in every precision. With segment starts (document mask)
// query i attends keys [first_i, i]: the scores left of first_i are computed and then zeroed like the
// causal ones right of i.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/precision.hpp"
#include "backend/cpu/scratch.hpp"
#include "backend/cpu/vec_math.hpp"

namespace zt::backend::cpu {
namespace {

// Query rows per block: a kBlockQ x T score tile per thread, and causal blocks skip the keys after them.
constexpr std::int64_t kBlockQ = kAttentionBlockQ;

struct Shape {
  std::int64_t B, T, C, W;  // W = C + 2 NKV hs: the width of a qkv row
  int n_head, n_kv_head;
  const std::int32_t* starts = nullptr;  // [B,T] segment starts, or null
};

struct Head {
  std::int64_t T, C, hs, ld;  // ld = W, the stride of q, k and v rows
  float scale;                // 1/sqrt(hs)
  const float* q;             // [T, hs] rows of stride ld; k and v: this head's K/V head
  const float* k;
  const float* v;
  float* dq;                  // the same places in dqkv (backward only)
  float* dk;
  float* dv;
  const float* o;             // [T, hs] rows of stride C: out, and dout in backward
  const float* dout;
  float* lse;                 // [T]
  const std::int32_t* first;  // [T] the first key each query attends (segment starts), or null: 0
};

// Query head h of batch b; its K/V head is h / (NH/NKV). Offsets are returned for dqkv to share.
Head head_at(const float* qkv, const Shape& s, std::int64_t b, std::int64_t h) {
  Head d{};
  d.T = s.T;
  d.C = s.C;
  d.ld = s.W;
  d.hs = d.C / s.n_head;
  d.scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  const std::int64_t row0 = b * d.T * s.W, kvh = h / (s.n_head / s.n_kv_head);
  d.q = qkv + row0 + h * d.hs;
  d.k = qkv + row0 + d.C + kvh * d.hs;
  d.v = d.k + s.n_kv_head * d.hs;
  d.first = s.starts ? s.starts + b * d.T : nullptr;
  return d;
}

// The same head's places in dqkv (same layout as qkv).
void grads_at(Head& d, float* dqkv, const float* qkv) {
  d.dq = dqkv + (d.q - qkv);
  d.dk = dqkv + (d.k - qkv);
  d.dv = dqkv + (d.v - qkv);
}

// S[bq, nk] = scale * Q[i0:i0+bq] @ K[0:nk]^T (one sgemm on this thread).
void scores(const Head& d, std::int64_t i0, std::int64_t bq, std::int64_t nk, float* S) {
  Gemm g;
  g.trans_b = true;
  g.m = bq, g.n = nk, g.k = d.hs;
  g.alpha = d.scale;
  g.a = d.q + i0 * d.ld, g.lda = d.ld;
  g.b = d.k, g.ldb = d.ld;
  g.c = S, g.ldc = nk;
  gemm_serial(g);
}

// Softmax of row[first, valid) in place (causal: keys j <= i; document mask: j >= first), zeros in
// [0, first) and [valid, nk); returns the row's log-sum-exp.
ZT_SIMD_CLONES float softmax_row(float* row, std::int64_t first, std::int64_t valid, std::int64_t nk) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (std::int64_t j = first; j < valid; ++j) mx = std::max(mx, row[j]);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t j = first; j < valid; ++j) {
    row[j] = fast_exp(row[j] - mx);
    sum += row[j];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (std::int64_t j = first; j < valid; ++j) row[j] *= inv;
  for (std::int64_t j = 0; j < first; ++j) row[j] = 0.0f;
  for (std::int64_t j = valid; j < nk; ++j) row[j] = 0.0f;
  return mx + std::log(sum);
}

// One backward row: p = exp(s - lse) over the keys [first, valid), ds = p * (dp - D); zeros elsewhere.
ZT_SIMD_CLONES void grad_row(float* pr, float* sr, std::int64_t first, std::int64_t valid, std::int64_t nk, float lse,
                             float D) {
#pragma omp simd
  for (std::int64_t j = first; j < valid; ++j) {
    pr[j] = fast_exp(pr[j] - lse);
    sr[j] = pr[j] * (sr[j] - D);
  }
  for (std::int64_t j = 0; j < first; ++j) pr[j] = sr[j] = 0.0f;
  for (std::int64_t j = valid; j < nk; ++j) pr[j] = sr[j] = 0.0f;
}

std::int64_t first_key(const Head& d, std::int64_t i) { return d.first ? d.first[i] : 0; }

// One query block of the forward: P = softmax over keys j <= i (causal), lse_i = log sum_j exp(s_ij),
// out[i0:i1] = P @ V[0:nk].
void forward_block(const Head& d, float* out, std::int64_t i0, std::int64_t i1, float* S) {
  const std::int64_t bq = i1 - i0, nk = i1;
  scores(d, i0, bq, nk, S);
  for (std::int64_t r = 0; r < bq; ++r) d.lse[i0 + r] = softmax_row(S + r * nk, first_key(d, i0 + r), i0 + r + 1, nk);
  Gemm g;
  g.m = bq, g.n = d.hs, g.k = nk;
  g.a = S, g.lda = nk;
  g.b = d.v, g.ldb = d.ld;
  g.c = out + i0 * d.C, g.ldc = d.C;
  gemm_serial(g);
}

// One query block of the backward, P rebuilt from lse (p_ij = exp(s_ij - lse_i)) and D_i = dO_i . O_i:
//   dP = dO V^T;  dS = P * (dP - D);  dQ = scale dS K (written);  dK += scale dS^T Q;  dV += P^T dO
void backward_block(const Head& d, std::int64_t i0, std::int64_t i1, float* P, float* dS) {
  const std::int64_t bq = i1 - i0, nk = i1, ld = d.ld;
  scores(d, i0, bq, nk, P);
  Gemm g;
  g.trans_b = true;
  g.m = bq, g.n = nk, g.k = d.hs;
  g.a = d.dout + i0 * d.C, g.lda = d.C;
  g.b = d.v, g.ldb = ld;
  g.c = dS, g.ldc = nk;
  gemm_serial(g);
  for (std::int64_t r = 0; r < bq; ++r) {
    const std::int64_t i = i0 + r, valid = i + 1;
    const float* dor = d.dout + i * d.C;
    const float* orow = d.o + i * d.C;
    float D = 0.0f;
    for (std::int64_t c = 0; c < d.hs; ++c) D += dor[c] * orow[c];
    grad_row(P + r * nk, dS + r * nk, first_key(d, i), valid, nk, d.lse[i], D);
  }
  const Gemm dq{false, false, bq, d.hs, nk, d.scale, dS, nk, d.k, ld, 0.0f, d.dq + i0 * ld, ld};
  const Gemm dk{true, false, nk, d.hs, bq, d.scale, dS, nk, d.q + i0 * ld, ld, 1.0f, d.dk, ld};
  const Gemm dv{true, false, nk, d.hs, bq, 1.0f, P, nk, d.dout + i0 * d.C, d.C, 1.0f, d.dv, ld};
  gemm_serial(dq);
  gemm_serial(dk);
  gemm_serial(dv);
}

Shape check_attention(const char* op, const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head,
                      const Tensor& segment_starts) {
  const AttentionDims a = check_attention_shapes(op, qkv, out, lse, n_head);
  return {a.B, a.T, a.C, a.W, n_head, a.n_kv_head, check_segment_starts(op, segment_starts, a.B, a.T, true)};
}

// out [B,T,C] and lse [B,NH,T] from qkv [B,T,3C], all fp32; tiles: threads * kBlockQ * T floats.
void forward_f32(float* o, float* l, const float* qkv, const Shape& s, float* tiles, int threads) {
  const std::int64_t T = s.T, C = s.C, n_head = s.n_head;
  const std::int64_t n_blocks = (T + kBlockQ - 1) / kBlockQ, items = s.B * n_head * n_blocks;
  // Items are independent (each owns rows of out and lse), so any schedule gives the same bits;
  // round-robin balances the causal blocks' growing cost.
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (std::int64_t it = 0; it < items; ++it) {
    const std::int64_t bh = it / n_blocks, blk = it % n_blocks, b = bh / n_head, h = bh % n_head;
    Head d = head_at(qkv, s, b, h);
    d.lse = l + bh * T;
    const std::int64_t i0 = blk * kBlockQ, i1 = std::min(T, i0 + kBlockQ);
    forward_block(d, o + b * T * C + h * d.hs, i0, i1, tiles + omp_get_thread_num() * kBlockQ * T);
  }
}

// dqkv [B,T,W] (written) from dout, qkv, out and lse, all fp32; tiles: threads * 2 * kBlockQ * T floats.
void backward_f32(float* dqkv, const float* dy, const float* qkv, const float* o, float* l, const Shape& s,
                  float* tiles, int threads) {
  const std::int64_t T = s.T, C = s.C, n_head = s.n_head, n_kv = s.n_kv_head, group = n_head / n_kv;
  const std::int64_t n_blocks = (T + kBlockQ - 1) / kBlockQ;
  // One (batch, K/V head) per item: its query heads and their query blocks run in order on one thread,
  // because each adds into the same dK and dV rows; items are independent, so the bits do not depend
  // on the schedule.
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (std::int64_t bk = 0; bk < s.B * n_kv; ++bk) {
    const std::int64_t b = bk / n_kv, h0 = (bk % n_kv) * group;
    float* P = tiles + omp_get_thread_num() * 2 * kBlockQ * T;
    for (std::int64_t h = h0; h < h0 + group; ++h) {
      Head d = head_at(qkv, s, b, h);
      grads_at(d, dqkv, qkv);
      d.o = o + b * T * C + h * d.hs;
      d.dout = dy + b * T * C + h * d.hs;
      d.lse = l + (b * n_head + h) * T;
      if (h == h0)
        for (std::int64_t j = 0; j < T; ++j) {  // dK and dV are sums over query heads and blocks: start at zero
          std::memset(d.dk + j * d.ld, 0, d.hs * sizeof(float));
          std::memset(d.dv + j * d.ld, 0, d.hs * sizeof(float));
        }
      for (std::int64_t blk = 0; blk < n_blocks; ++blk)
        backward_block(d, blk * kBlockQ, std::min(T, (blk + 1) * kBlockQ), P, P + kBlockQ * T);
    }
  }
}

}  // namespace

void CpuBackend::attention_forward(Tensor out, Tensor lse, Tensor qkv, int n_head, Tensor segment_starts) {
  const char* op = "attention_forward";
  const Shape s = check_attention(op, qkv, out, lse, n_head, segment_starts);
  const DType x = compute_dtype(op, {{"out", out, Role::kCompute}, {"qkv", qkv, Role::kCompute},
                                     {"lse", lse, Role::kF32}});
  if (x == DType::kF32)
    return forward_f32(out.f32(op), lse.f32(op), qkv.f32(op), s, workspace(attention_tile_floats(threads_, s.T, false)),
                       threads_);
  const std::int64_t N = s.B * s.T;
  ScratchParts parts(workspace(attention_x_floats(threads_, N, s.T, s.C, false, s.W)));
  float* tiles = parts.take(attention_tile_floats(threads_, s.T, false));
  float* qkvf = parts.take(N * s.W);
  float* of = parts.take(N * s.C);
  to_f32(qkvf, qkv, threads_);
  forward_f32(of, lse.f32(op), qkvf, s, tiles, threads_);
  from_f32(out, of, threads_);
}

void CpuBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, int n_head,
                                    Tensor segment_starts) {
  const char* op = "attention_backward";
  const Shape s = check_attention(op, qkv, out, lse, n_head, segment_starts);
  expect_shape(op, "dqkv", dqkv, {qkv.dim(0), qkv.dim(1), qkv.dim(2)});
  expect_shape(op, "dout", dout, {out.dim(0), out.dim(1), out.dim(2)});
  const DType x = compute_dtype(op, {{"dqkv", dqkv, Role::kCompute}, {"dout", dout, Role::kCompute},
                                     {"qkv", qkv, Role::kCompute}, {"out", out, Role::kCompute},
                                     {"lse", lse, Role::kF32}});
  if (x == DType::kF32)
    return backward_f32(dqkv.f32(op), dout.f32(op), qkv.f32(op), out.f32(op), lse.f32(op), s,
                        workspace(attention_tile_floats(threads_, s.T, true)), threads_);
  const std::int64_t N = s.B * s.T;
  ScratchParts parts(workspace(attention_x_floats(threads_, N, s.T, s.C, true, s.W)));
  float* tiles = parts.take(attention_tile_floats(threads_, s.T, true));
  float* qkvf = parts.take(N * s.W);
  float* dqf = parts.take(N * s.W);
  float* of = parts.take(N * s.C);
  float* dyf = parts.take(N * s.C);
  to_f32(qkvf, qkv, threads_);
  to_f32(of, out, threads_);
  to_f32(dyf, dout, threads_);
  backward_f32(dqf, dyf, qkvf, of, lse.f32(op), s, tiles, threads_);
  from_f32(dqkv, dqf, threads_);
}

}  // namespace zt::backend::cpu

