// Fused softmax + cross-entropy over the first `vocab` columns of padded logits [N, Vp], forward and
// backward. Padded columns [vocab, Vp) never enter the softmax and get zero gradient.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/vec_math.hpp"

namespace zt::backend::cpu {
namespace {

// lse = max + log(sum_j exp(row[j] - max)) over j < vocab; the sum is kept in double so a 50k-wide row
// loses no precision.
ZT_SIMD_CLONES float row_lse(const float* row, std::int64_t vocab) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (std::int64_t j = 0; j < vocab; ++j) mx = std::max(mx, row[j]);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t j = 0; j < vocab; ++j) sum += fast_exp(row[j] - mx);
  return mx + static_cast<float>(std::log(sum));
}

// drow[j] = dloss * exp(row[j] - lse) for j < vocab (drow may be row itself).
ZT_SIMD_CLONES void row_softmax_scaled(float* drow, const float* row, std::int64_t vocab, float lse, float dloss) {
#pragma omp simd
  for (std::int64_t j = 0; j < vocab; ++j) drow[j] = dloss * fast_exp(row[j] - lse);
}

void check_ce(const char* op, const Tensor& logits, const Tensor& targets, int vocab) {
  const std::int64_t N = rows_of(logits), Vp = logits.dim(-1);
  ZT_CHECK(vocab > 0 && vocab <= Vp, op, ": vocab=", vocab, " must be in [1, ", Vp, "] (logits ",
           logits.shape_string(), ")");
  ZT_CHECK_EQ(targets.numel(), N, op, ": targets ", targets.shape_string(), " needs one per row of logits ",
              logits.shape_string());
  const std::int32_t* t = targets.i32(op);
  for (std::int64_t n = 0; n < N; ++n)
    if (t[n] < 0 || t[n] >= vocab)
      throw Error(cat(op, ": target ", t[n], " at row ", n, " is outside the vocabulary [0, ", vocab, ")"));
}

}  // namespace

// losses[n] = logsumexp(logits[n, :V]) - logits[n, targets[n]]
void CpuBackend::cross_entropy_forward(Tensor losses, Tensor logits, Tensor targets, int vocab) {
  const char* op = "cross_entropy_forward";
  check_ce(op, logits, targets, vocab);
  const std::int64_t N = rows_of(logits), Vp = logits.dim(-1);
  ZT_CHECK_EQ(losses.numel(), N, op, ": losses ", losses.shape_string(), " needs one per row");
  const float* x = logits.f32(op);
  const std::int32_t* t = targets.i32(op);
  float* loss = losses.f32(op);
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* row = x + n * Vp;
    loss[n] = row_lse(row, vocab) - row[t[n]];
  }
}

// dlogits[n, j] = dloss * (softmax(logits[n, :V])_j - [j == target]) for j < V, 0 for padded j.
// In place is allowed: the row's lse is found before any of its elements is overwritten.
void CpuBackend::cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor targets, float dloss, int vocab) {
  const char* op = "cross_entropy_backward";
  check_ce(op, logits, targets, vocab);
  const std::int64_t N = rows_of(logits), Vp = logits.dim(-1);
  expect_rows(op, "dlogits", dlogits, N, Vp);
  const float* x = logits.f32(op);
  const std::int32_t* t = targets.i32(op);
  float* dx = dlogits.f32(op);
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* row = x + n * Vp;
    float* drow = dx + n * Vp;
    const float lse = row_lse(row, vocab);
    row_softmax_scaled(drow, row, vocab, lse, dloss);
    drow[t[n]] -= dloss;
    for (std::int64_t j = vocab; j < Vp; ++j) drow[j] = 0.0f;
  }
}

}  // namespace zt::backend::cpu
