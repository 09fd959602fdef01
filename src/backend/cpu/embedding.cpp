// Token + position embedding, forward and backward (GPT-2: h0 = wte[token] + wpe[position]).
// The backward scatter is race-free and order-fixed: each thread owns a strip of columns and walks
// every row in order, so dwte is the same for any thread count. In mixed precision out, wte, wpe and
// dout are X (the sum rounded once); dwte and dwpe stay f32 accumulators.
#include <algorithm>

#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/partition.hpp"
#include "backend/cpu/precision.hpp"

namespace zt::backend::cpu {
namespace {

// Every token must index a row of wte (a bad token id is a data bug, not something to read past), or be
// kTokenInOtherRows where there is no position table.
void check_tokens(const char* op, const std::int32_t* tokens, std::int64_t n, std::int64_t n_rows, bool positions) {
  for (std::int64_t i = 0; i < n; ++i)
    if ((tokens[i] < 0 || tokens[i] >= n_rows) && (tokens[i] != kTokenInOtherRows || positions))
      throw Error(cat(op, ": token ", tokens[i], " at position ", i, " is outside wte's ", n_rows, " rows"));
}

// out [BT, C] = e[tok] + p[t] (p null: e[tok] alone), T the storage type of out, wte and wpe; t = bt % T, or
// pos[bt] when given (-1: row 0).
template <typename T>
void embed(T* o, const std::int32_t* tok, const T* e, const T* p, const std::int32_t* pos, std::int64_t BT,
           std::int64_t T_len, std::int64_t C, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t bt = 0; bt < BT; ++bt) {
    if (tok[bt] == kTokenInOtherRows) continue;
    const T* er = e + tok[bt] * C;
    T* orow = o + bt * C;
    if (p == nullptr) {
      std::copy_n(er, C, orow);
      continue;
    }
    const T* pr = p + (pos != nullptr ? std::max(pos[bt], 0) : bt % T_len) * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) orow[c] = store<T>(load(er[c]) + load(pr[c]));
  }
}

// dst[key[r]] += rows r of d [n, C] in row order (column strip per thread: a fixed summation order per
// column, the same for any thread count); a key outside [0, n_keys) adds nothing (kTokenInOtherRows, a
// padding position -1). T is d's storage type.
template <typename T>
void scatter_rows(float* dst, const T* d, const std::int32_t* key, std::int64_t n, std::int64_t n_keys, std::int64_t C,
                  int threads) {
  const int parts = threads;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int s = 0; s < parts; ++s) {
    std::int64_t c0, c1;
    column_strip(C, parts, s, c0, c1);
    for (std::int64_t r = 0; r < n; ++r) {
      if (key[r] < 0 || key[r] >= n_keys) continue;
      float* wr = dst + key[r] * C;
      const T* dr = d + r * C;
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) wr[c] += load(dr[c]);
    }
  }
}

// dwpe[t] += sum_b dout[b,t] (b in order). T is dout's storage type.
template <typename T>
void position_grads(float* dp, const T* d, std::int64_t B, std::int64_t T_len, std::int64_t C, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t t = 0; t < T_len; ++t) {
    float* pr = dp + t * C;
    for (std::int64_t b = 0; b < B; ++b) {
      const T* dr = d + (b * T_len + t) * C;
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) pr[c] += load(dr[c]);
    }
  }
}

}  // namespace

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t or positions[b,t],:]
void CpuBackend::embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, Tensor positions) {
  const char* op = "embedding_forward";
  check_embedding_shapes(op, out, tokens, wte, wpe, !positions.empty());
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(-1);
  const std::int32_t* pos = wpe.empty() ? nullptr : check_positions(op, positions, B, T, wpe.dim(0), true);
  const DType x = compute_dtype(op, {{"out", out, Role::kCompute}, {"wte", wte, Role::kCompute},
                                     {"wpe", wpe, Role::kCompute}});
  const std::int32_t* tok = tokens.i32(op);
  check_tokens(op, tok, B * T, wte.dim(0), !wpe.empty());
  with_storage(x, [&](auto tag) {
    using S = decltype(tag);
    embed(data_as<S>(out), tok, data_as<S>(wte), wpe.empty() ? nullptr : data_as<S>(wpe), pos, B * T, T, C, threads_);
  });
}

// dwte[tokens[b,t],:] += dout[b,t,:];  dwpe[t or positions[b,t],:] += dout[b,t,:]
void CpuBackend::embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens, Tensor positions) {
  const char* op = "embedding_backward";
  ZT_CHECK_EQ(tokens.rank, 2, op, ": tokens must be [B,T], got ", tokens.shape_string());
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), C = dwte.dim(-1);
  expect_shape(op, "dout", dout, {B, T, C});
  const std::int32_t* pos = nullptr;
  if (!dwpe.empty()) {
    ZT_CHECK_EQ(dwpe.dim(-1), C, op, ": dwpe and dwte widths differ");
    pos = check_positions(op, positions, B, T, dwpe.dim(0), true);
    if (pos == nullptr) ZT_CHECK_LE(T, dwpe.dim(0), op, ": sequence longer than the position table");
  }
  const DType x = compute_dtype(op, {{"dwte", dwte, Role::kF32}, {"dwpe", dwpe, Role::kF32},
                                     {"dout", dout, Role::kCompute}});
  const std::int32_t* tok = tokens.i32(op);
  check_tokens(op, tok, B * T, dwte.dim(0), !dwpe.empty());
  with_storage(x, [&](auto tag) {
    const auto* d = data_as<decltype(tag)>(dout);
    scatter_rows(dwte.f32(op), d, tok, B * T, dwte.dim(0), C, threads_);
    if (dwpe.empty()) return;
    if (pos != nullptr) scatter_rows(dwpe.f32(op), d, pos, B * T, dwpe.dim(0), C, threads_);
    else position_grads(dwpe.f32(op), d, B, T, C, threads_);
  });
}

}  // namespace zt::backend::cpu
