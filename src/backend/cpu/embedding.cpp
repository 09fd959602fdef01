// Token + position embedding, forward and backward (GPT-2: h0 = wte[token] + wpe[position]).
// The backward scatter is race-free and order-fixed: each thread owns a strip of columns and walks
// every row in order, so dwte is the same for any thread count.
#include "backend/cpu/checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/partition.hpp"

namespace zt::backend::cpu {
namespace {

// Every token must index a row of wte (a bad token id is a data bug, not something to read past).
void check_tokens(const char* op, const std::int32_t* tokens, std::int64_t n, std::int64_t n_rows) {
  for (std::int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= n_rows)
      throw Error(cat(op, ": token ", tokens[i], " at position ", i, " is outside wte's ", n_rows, " rows"));
}

}  // namespace

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
void CpuBackend::embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe) {
  const char* op = "embedding_forward";
  ZT_CHECK_EQ(tokens.rank, 2, op, ": tokens must be [B,T], got ", tokens.shape_string());
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(-1);
  expect_shape(op, "out", out, {B, T, C});
  ZT_CHECK_EQ(wte.rank, 2, op, ": wte must be [Vp,C]");
  ZT_CHECK_EQ(wpe.rank, 2, op, ": wpe must be [maxT,C]");
  ZT_CHECK_EQ(wpe.dim(1), C, op, ": wpe and wte widths differ");
  ZT_CHECK_LE(T, wpe.dim(0), op, ": sequence longer than the position table");
  float* o = out.f32(op);
  const std::int32_t* tok = tokens.i32(op);
  const float* e = wte.f32(op);
  const float* p = wpe.f32(op);
  check_tokens(op, tok, B * T, wte.dim(0));
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::int64_t bt = 0; bt < B * T; ++bt) {
    const float* er = e + tok[bt] * C;
    const float* pr = p + (bt % T) * C;
    float* orow = o + bt * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) orow[c] = er[c] + pr[c];
  }
}

// dwte[tokens[b,t],:] += dout[b,t,:];  dwpe[t,:] += sum_b dout[b,t,:]
void CpuBackend::embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens) {
  const char* op = "embedding_backward";
  ZT_CHECK_EQ(tokens.rank, 2, op, ": tokens must be [B,T], got ", tokens.shape_string());
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), C = dwte.dim(-1);
  expect_shape(op, "dout", dout, {B, T, C});
  ZT_CHECK_EQ(dwpe.dim(-1), C, op, ": dwpe and dwte widths differ");
  ZT_CHECK_LE(T, dwpe.dim(0), op, ": sequence longer than the position table");
  float* dw = dwte.f32(op);
  float* dp = dwpe.f32(op);
  const float* d = dout.f32(op);
  const std::int32_t* tok = tokens.i32(op);
  check_tokens(op, tok, B * T, dwte.dim(0));
  const int parts = threads_;
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (int s = 0; s < parts; ++s) {
    std::int64_t c0, c1;
    column_strip(C, parts, s, c0, c1);
    for (std::int64_t bt = 0; bt < B * T; ++bt) {  // rows in order: a fixed summation order per column
      float* wr = dw + tok[bt] * C;
      const float* dr = d + bt * C;
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) wr[c] += dr[c];
    }
  }
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::int64_t t = 0; t < T; ++t) {
    float* pr = dp + t * C;
    for (std::int64_t b = 0; b < B; ++b) {
      const float* dr = d + (b * T + t) * C;
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) pr[c] += dr[c];
    }
  }
}

}  // namespace zt::backend::cpu
