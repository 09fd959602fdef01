// What every backend checks and computes the same way before any arithmetic: shape checks (failing with
// the op, the argument and both shapes named: the same message for the same mistake on either backend),
// the shapes of the matmul and LayerNorm ops, and AdamW's per-step scalars.
#pragma once

#include <cstdint>

#include <cmath>

#include "backend/backend.hpp"
#include "backend/tensor.hpp"

namespace zt::backend {

// dropout's keep threshold: a Philox word >= it keeps the element (p * 2^32 rounded down; p in [0, 1)).
inline std::uint32_t dropout_threshold(const char* op, float p) {
  if (!(p >= 0.0f && p < 1.0f)) throw Error(cat(op, ": p=", p, " must be in [0, 1)"));
  return static_cast<std::uint32_t>(std::floor(static_cast<double>(p) * 4294967296.0));
}

// dropout's counter stride between rows: row_stride, or the row length W = out.dim(-1) for 0; never below W
// (rows would share counters, hence masks).
inline std::int64_t dropout_row_stride(const char* op, const Tensor& out, std::int64_t row_stride) {
  const std::int64_t width = out.rank == 0 ? 1 : out.dim(-1);
  if (row_stride == 0) return width;
  if (row_stride < width) throw Error(cat(op, ": row_stride=", row_stride, " is below the row length ", width));
  return row_stride;
}

// Rows of a tensor read as [rows, last dim] (a [B,T,C] activation is N = B*T rows of C).
inline std::int64_t rows_of(const Tensor& t) { return t.rank == 0 ? 0 : t.numel() / t.dim(-1); }

// t must have exactly these dims.
inline void expect_shape(const char* op, const char* arg, const Tensor& t, std::initializer_list<std::int64_t> dims) {
  Tensor want(nullptr, t.dtype, dims);
  bool same = want.rank == t.rank;
  for (int i = 0; same && i < t.rank; ++i) same = want.shape[i] == t.shape[i];
  if (!same) throw Error(cat(op, ": ", arg, " has shape ", t.shape_string(), ", expected ", want.shape_string()));
}

// t must hold `rows` rows of `cols` (any leading dims whose product is rows).
inline void expect_rows(const char* op, const char* arg, const Tensor& t, std::int64_t rows, std::int64_t cols) {
  if (t.rank == 0 || t.dim(-1) != cols || rows_of(t) != rows)
    throw Error(cat(op, ": ", arg, " has shape ", t.shape_string(), ", expected ", rows, " rows of ", cols));
}

inline void expect_same_numel(const char* op, const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel())
    throw Error(cat(op, ": shapes ", a.shape_string(), " and ", b.shape_string(), " differ in size"));
}

// matmul: inp [N,IC], weight [IC,OC] (kInOut) or [OC,IC] (kOutIn), out/dout [N,OC], bias [OC] or empty.
struct MatmulDims {
  std::int64_t n, ic, oc;
};
inline MatmulDims check_matmul_shapes(const char* op, const Tensor& out, const Tensor& inp, const Tensor& weight,
                                      const Tensor& bias, WeightLayout layout) {
  ZT_CHECK_EQ(weight.rank, 2, op, ": weight must be 2-D, got ", weight.shape_string());
  const bool in_out = layout == WeightLayout::kInOut;
  const MatmulDims d{rows_of(inp), inp.dim(-1), in_out ? weight.dim(1) : weight.dim(0)};
  if ((in_out ? weight.dim(0) : weight.dim(1)) != d.ic)
    throw Error(cat(op, ": weight ", weight.shape_string(), " does not fit inp ", inp.shape_string(), " (layout ",
                    in_out ? "[IC,OC]" : "[OC,IC]", ")"));
  expect_rows(op, "out", out, d.n, d.oc);
  if (!bias.empty()) expect_shape(op, "bias", bias, {d.oc});
  return d;
}

// matmul_backward_input_accumulate: dout [N,OC], weight [IC,OC] (kInOut) or [OC,IC] (kOutIn), dinp [N,IC].
inline MatmulDims check_matmul_input_grad_shapes(const char* op, const Tensor& dinp, const Tensor& dout,
                                                 const Tensor& weight, WeightLayout layout) {
  ZT_CHECK_EQ(weight.rank, 2, op, ": weight must be 2-D, got ", weight.shape_string());
  const bool in_out = layout == WeightLayout::kInOut;
  const MatmulDims d{rows_of(dout), in_out ? weight.dim(0) : weight.dim(1), dout.dim(-1)};
  if ((in_out ? weight.dim(1) : weight.dim(0)) != d.oc)
    throw Error(cat(op, ": weight ", weight.shape_string(), " does not fit dout ", dout.shape_string(), " (layout ",
                    in_out ? "[IC,OC]" : "[OC,IC]", ")"));
  expect_rows(op, "dinp", dinp, d.n, d.ic);
  return d;
}

// dequantize_nf4 (codes_per_byte 2) and dequantize_blockwise8 (1): out [n] (f32/bf16/f16 for NF4, f32 for the
// 8-bit scales), codes [n / codes_per_byte rounded up] u8, absmax [ceil(n/block)] f32, block a power of two
// (its shift returned: element i's scale is absmax[i >> shift]).
inline int check_blockwise_shapes(const char* op, const Tensor& out, const Tensor& codes, const Tensor& absmax,
                                  int block, int codes_per_byte) {
  const DType o = out.dtype;
  if (codes_per_byte == 1 && o != DType::kF32) throw Error(cat(op, ": out is ", dtype_name(o), " (needs f32)"));
  if (o != DType::kF32 && o != DType::kBF16 && o != DType::kF16)
    throw Error(cat(op, ": out is ", dtype_name(o), " (needs f32, bf16 or f16: the compute dtype)"));
  if (codes.dtype != DType::kU8) throw Error(cat(op, ": codes must be u8, got ", dtype_name(codes.dtype)));
  if (absmax.dtype != DType::kF32) throw Error(cat(op, ": absmax must be f32, got ", dtype_name(absmax.dtype)));
  if (block <= 0 || (block & (block - 1)) != 0) throw Error(cat(op, ": block=", block, " is not a power of two"));
  const std::int64_t n = out.numel();
  ZT_CHECK_EQ(codes.numel(), (n + codes_per_byte - 1) / codes_per_byte, op, ": codes hold ", codes_per_byte,
              " a byte for out ", out.shape_string());
  ZT_CHECK_EQ(absmax.numel(), (n + block - 1) / block, op, ": absmax holds one scale per block of ", block,
              " for out ", out.shape_string());
  int shift = 0;
  while ((1 << shift) < block) ++shift;
  return shift;
}

// layernorm: x, y [N,C]; mean, rstd [N]; weight [C].
inline void check_layernorm_shapes(const char* op, const Tensor& x, const Tensor& y, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& weight) {
  const std::int64_t C = x.dim(-1), N = rows_of(x);
  expect_rows(op, "output", y, N, C);
  expect_shape(op, "weight", weight, {C});
  ZT_CHECK_EQ(mean.numel(), N, op, ": mean needs one value per row of ", x.shape_string());
  ZT_CHECK_EQ(rstd.numel(), N, op, ": rstd needs one value per row of ", x.shape_string());
}

// embedding_forward: tokens [B,T], out [B,T,C], wte [Vp,C], wpe [maxT,C] with T <= maxT, or empty (Llama:
// positions come from RoPE).
inline void check_embedding_shapes(const char* op, const Tensor& out, const Tensor& tokens, const Tensor& wte,
                                   const Tensor& wpe, bool positioned = false) {
  ZT_CHECK_EQ(tokens.rank, 2, op, ": tokens must be [B,T], got ", tokens.shape_string());
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(-1);
  expect_shape(op, "out", out, {B, T, C});
  ZT_CHECK_EQ(wte.rank, 2, op, ": wte must be [Vp,C]");
  if (wpe.empty()) return;
  ZT_CHECK_EQ(wpe.rank, 2, op, ": wpe must be [maxT,C]");
  ZT_CHECK_EQ(wpe.dim(1), C, op, ": wpe and wte widths differ");
  if (!positioned) ZT_CHECK_LE(T, wpe.dim(0), op, ": sequence longer than the position table");
}

// attention: qkv [B,T,W] as (q | k | v) with q C = NH*hs columns and k, v NKV*hs each (W = 3C for
// multi-head attention), out [B,T,C], lse [B,NH,T]. NKV is read off the widths and must divide NH.
struct AttentionDims {
  std::int64_t B, T, C, W;
  int n_kv_head;
};
inline AttentionDims check_attention_shapes(const char* op, const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                            int n_head) {
  ZT_CHECK_EQ(qkv.rank, 3, op, ": qkv must be [B,T,W], got ", qkv.shape_string());
  ZT_CHECK_EQ(out.rank, 3, op, ": out must be [B,T,C], got ", out.shape_string());
  ZT_CHECK_GT(n_head, 0, op, ": n_head must be positive");
  const std::int64_t B = qkv.dim(0), T = qkv.dim(1), W = qkv.dim(2), C = out.dim(2);
  ZT_CHECK(C > 0 && C % n_head == 0, op, ": C=", C, " is not divisible by n_head=", n_head);
  const std::int64_t hs = C / n_head, kv_cols = W - C;
  if (kv_cols <= 0 || kv_cols % (2 * hs) != 0 || n_head % (kv_cols / (2 * hs)) != 0)
    throw Error(cat(op, ": qkv ", qkv.shape_string(), " does not hold q (", C, " columns) then k and v of NKV heads of ",
                    hs, " with NKV dividing n_head=", n_head, " (out ", out.shape_string(), ")"));
  expect_shape(op, "out", out, {B, T, C});
  expect_shape(op, "lse", lse, {B, n_head, T});
  return {B, T, C, W, static_cast<int>(kv_cols / (2 * hs))};
}

// segment_starts (attention's document mask), when given: [B,T] i32 on the host-readable backend, each
// start in [0, t] for its query t. Returns the data, or nullptr when empty.
inline const std::int32_t* check_segment_starts(const char* op, const Tensor& starts, std::int64_t B, std::int64_t T,
                                                bool host_readable) {
  if (starts.data == nullptr) return nullptr;
  expect_shape(op, "segment_starts", starts, {B, T});
  ZT_CHECK(starts.dtype == DType::kI32, op, ": segment_starts must be i32");
  const auto* s = static_cast<const std::int32_t*>(starts.data);
  if (host_readable)
    for (std::int64_t i = 0; i < B * T; ++i)
      ZT_CHECK(s[i] >= 0 && s[i] <= i % T, op, ": segment_starts[", i / T, ", ", i % T, "] = ", s[i],
               " is outside [0, ", i % T, "]");
  return s;
}

// positions [B,T] i32 (generation): each in [-1, limit) where the host can read them; null when empty.
inline const std::int32_t* check_positions(const char* op, const Tensor& positions, std::int64_t B, std::int64_t T,
                                           std::int64_t limit, bool host_readable) {
  if (positions.data == nullptr) return nullptr;
  expect_shape(op, "positions", positions, {B, T});
  ZT_CHECK(positions.dtype == DType::kI32, op, ": positions must be i32");
  const auto* p = static_cast<const std::int32_t*>(positions.data);
  if (host_readable)
    for (std::int64_t i = 0; i < B * T; ++i)
      ZT_CHECK(p[i] >= -1 && p[i] < limit, op, ": positions[", i / T, ", ", i % T, "] = ", p[i], " is outside [-1, ",
               limit, ")");
  return p;
}

// attention over a KV cache: qkv [B,T,W] (q of C = NH*hs columns, then k and v of KVW = NKV*hs each),
// out [B,T,C], k_cache and v_cache [S, maxT, KVW], slots [B] i32, positions [B,T] i32.
struct CachedAttentionDims {
  std::int64_t B, T, C, W, S, max_len, kv_width, hs;
  int n_kv_head;
};
inline CachedAttentionDims check_cached_attention_shapes(const char* op, const Tensor& out, const Tensor& qkv,
                                                         const Tensor& k_cache, const Tensor& v_cache,
                                                         const Tensor& slots, const Tensor& positions, int n_head) {
  ZT_CHECK_EQ(qkv.rank, 3, op, ": qkv must be [B,T,W], got ", qkv.shape_string());
  ZT_CHECK_EQ(k_cache.rank, 3, op, ": k_cache must be [S,maxT,NKV*hs], got ", k_cache.shape_string());
  ZT_CHECK_GT(n_head, 0, op, ": n_head must be positive");
  const std::int64_t B = qkv.dim(0), T = qkv.dim(1), W = qkv.dim(2), KVW = k_cache.dim(2), C = W - 2 * KVW;
  ZT_CHECK(C > 0 && C % n_head == 0, op, ": qkv ", qkv.shape_string(), " with caches of ", KVW,
           " columns leaves ", C, " query columns, not a multiple of n_head=", n_head);
  const std::int64_t hs = C / n_head;
  ZT_CHECK(KVW % hs == 0 && n_head % (KVW / hs) == 0, op, ": caches of ", KVW, " columns are not K/V heads of ", hs,
           " dividing n_head=", n_head);
  expect_shape(op, "out", out, {B, T, C});
  expect_shape(op, "v_cache", v_cache, {k_cache.dim(0), k_cache.dim(1), KVW});
  expect_shape(op, "slots", slots, {B});
  expect_shape(op, "positions", positions, {B, T});
  ZT_CHECK(slots.dtype == DType::kI32 && positions.dtype == DType::kI32, op, ": slots and positions must be i32");
  return {B, T, C, W, k_cache.dim(0), k_cache.dim(1), KVW, hs, static_cast<int>(KVW / hs)};
}

// rmsnorm: x, y [N,C]; rstd [N]; weight [C].
inline void check_rmsnorm_shapes(const char* op, const Tensor& x, const Tensor& y, const Tensor& rstd,
                                 const Tensor& weight) {
  const std::int64_t C = x.dim(-1), N = rows_of(x);
  expect_rows(op, "output", y, N, C);
  expect_shape(op, "weight", weight, {C});
  ZT_CHECK_EQ(rstd.numel(), N, op, ": rstd needs one value per row of ", x.shape_string());
}

// head_rmsnorm: x, y [N,W]; heads [first, first + n) of hs = weight.numel() columns inside W; rstd [N, n].
struct HeadNormDims {
  std::int64_t N, W, hs, first, n;
};
inline HeadNormDims check_head_rmsnorm_shapes(const char* op, const Tensor& x, const Tensor& y, const Tensor& rstd,
                                              const Tensor& weight, int first_head, int n_heads) {
  const std::int64_t W = x.dim(-1), N = rows_of(x), hs = weight.numel();
  expect_rows(op, "output", y, N, W);
  ZT_CHECK_EQ(weight.rank, 1, op, ": weight must be [hs], got ", weight.shape_string());
  ZT_CHECK(hs > 0 && first_head >= 0 && n_heads > 0 && (first_head + n_heads) * hs <= W, op, ": heads [", first_head,
           ", ", first_head + n_heads, ") of ", hs, " columns do not fit rows of ", W);
  ZT_CHECK_EQ(rstd.numel(), N * n_heads, op, ": rstd needs one value per row and head");
  return {N, W, hs, first_head, n_heads};
}

// rope: x [B,T,W] whose first n_rot_heads heads of hs = 2 * inv_freq.numel() columns are rotated.
struct RopeDims {
  std::int64_t B, T, W, half;
};
inline RopeDims check_rope_shapes(const char* op, const Tensor& x, const Tensor& inv_freq, int n_rot_heads) {
  ZT_CHECK_EQ(x.rank, 3, op, ": x must be [B,T,W], got ", x.shape_string());
  ZT_CHECK_EQ(inv_freq.rank, 1, op, ": inv_freq must be [hs/2], got ", inv_freq.shape_string());
  const std::int64_t half = inv_freq.dim(0);
  ZT_CHECK(half > 0 && n_rot_heads > 0 && n_rot_heads * 2 * half <= x.dim(2), op, ": ", n_rot_heads,
           " heads of ", 2 * half, " columns do not fit x ", x.shape_string());
  return {x.dim(0), x.dim(1), x.dim(2), half};
}

// swiglu: inp [N,2F] as (gate | up), out [N,F].
inline std::int64_t check_swiglu_shapes(const char* op, const Tensor& out, const Tensor& inp) {
  const std::int64_t F = out.dim(-1), N = rows_of(out);
  expect_rows(op, "inp", inp, N, 2 * F);
  return F;
}

// AdamW's scalars for one step, in double as PyTorch computes them in Python, then used as float (its
// opmath type), so both backends' kernels do the same float arithmetic:
//   g = grad * grad_scale;  p *= decay;  m = b1 m + one_b1 g;  v = b2 v + one_b2 g^2;
//   p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
struct AdamScalars {
  float step_size, bc2_sqrt, decay, b1, b2, one_b1, one_b2, eps, grad_scale;
};
inline AdamScalars adamw_scalars(const Backend::AdamW& hp) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), hp.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), hp.step);
  return {static_cast<float>(hp.lr / bc1), static_cast<float>(std::sqrt(bc2)),
          static_cast<float>(1.0 - static_cast<double>(hp.lr) * hp.weight_decay), hp.beta1, hp.beta2,
          static_cast<float>(1.0 - hp.beta1), static_cast<float>(1.0 - hp.beta2), hp.eps, hp.grad_scale};
}

}  // namespace zt::backend
