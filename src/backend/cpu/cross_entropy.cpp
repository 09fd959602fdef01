// Fused softmax + cross-entropy over the first `vocab` columns of padded logits [N, Vp], forward and
// backward. Padded columns [vocab, Vp) never enter the softmax and get zero gradient. In mixed
// precision each X row is widened into a per-thread fp32 row, the fp32 row kernels run on it, and the
// gradient row is rounded once: the target's p - 1 is formed in fp32 before any rounding.
// A target of kIgnoreTarget (-1: a token the loss mask leaves out) gives loss 0 and a zero gradient row.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/precision.hpp"
#include "backend/cpu/scratch.hpp"
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
    if ((t[n] < 0 || t[n] >= vocab) && t[n] != kIgnoreTarget)
      throw Error(cat(op, ": target ", t[n], " at row ", n, " is outside the vocabulary [0, ", vocab, ") and is not ",
                      kIgnoreTarget, " (ignored)"));
}

// Row n of X logits [N, Vp], its first `cols` columns widened into this thread's fp32 row of `rows`
// (cross_entropy_x_floats floats in all).
template <typename T>
float* widened_row(const T* x, std::int64_t n, std::int64_t Vp, std::int64_t cols, float* rows) {
  float* buf = rows + omp_get_thread_num() * line_floats(Vp);
  const T* row = x + n * Vp;
  for (std::int64_t j = 0; j < cols; ++j) buf[j] = load(row[j]);
  return buf;
}

template <typename T>
void ce_forward_rows(float* loss, const T* x, const std::int32_t* t, std::int64_t N, std::int64_t Vp, int vocab,
                     float* rows, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    if (t[n] == kIgnoreTarget) {
      loss[n] = 0.0f;
      continue;
    }
    const float* row;
    if constexpr (kIsF32<T>) row = x + n * Vp;
    else row = widened_row(x, n, Vp, vocab, rows);
    loss[n] = row_lse(row, vocab) - row[t[n]];
  }
}

// dx may be x itself: row n is read (widened, for X) before any of it is written. For X the gradient
// row is built in the thread's fp32 row and rounded once at the end.
template <typename T>
void ce_backward_rows(T* dx, const T* x, const std::int32_t* t, float dloss_all, const float* scale, std::int64_t N,
                      std::int64_t Vp, int vocab, float* rows, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float dloss = scale != nullptr ? dloss_all * scale[n] : dloss_all;
    if (t[n] == kIgnoreTarget) {
      std::fill_n(dx + n * Vp, Vp, store<T>(0.0f));
      continue;
    }
    const float* row;
    float* drow;
    if constexpr (kIsF32<T>) row = x + n * Vp, drow = dx + n * Vp;
    else row = drow = widened_row(x, n, Vp, vocab, rows);
    const float lse = row_lse(row, vocab);
    row_softmax_scaled(drow, row, vocab, lse, dloss);
    drow[t[n]] -= dloss;
    for (std::int64_t j = vocab; j < Vp; ++j) drow[j] = 0.0f;
    if constexpr (!kIsF32<T>)
      for (std::int64_t j = 0; j < Vp; ++j) dx[n * Vp + j] = store<T>(drow[j]);
  }
}

// ---- one slice of the vocabulary (backend.hpp: cross_entropy_slice_*) ----------------------------
void check_slice(const char* op, const Tensor& logits, const Tensor& targets, int real) {
  const std::int64_t N = rows_of(logits), Vs = logits.dim(-1);
  ZT_CHECK(real >= 0 && real <= Vs, op, ": real=", real, " must be in [0, ", Vs, "] (logits ", logits.shape_string(), ")");
  ZT_CHECK_EQ(targets.numel(), N, op, ": targets ", targets.shape_string(), " needs one per row of logits ",
              logits.shape_string());
  const std::int32_t* t = targets.i32(op);
  for (std::int64_t n = 0; n < N; ++n)
    if ((t[n] < 0 || t[n] >= real) && t[n] != kTargetInOtherSlice && t[n] != kIgnoreTarget)
      throw Error(cat(op, ": target column ", t[n], " at row ", n, " is outside the slice's ids [0, ", real, ") and is not ",
                      kTargetInOtherSlice, " (another slice's) or ", kIgnoreTarget, " (ignored)"));
}

// xs (optional): the entropy's statistic, sum exp(x - m) (x - m), in double like the sum of exp; a -inf
// column adds nothing (its 0 * -inf would be NaN).
template <typename T>
void slice_stats_rows(float* stats, float* xs, const T* x, const std::int32_t* t, std::int64_t N, std::int64_t Vs,
                      int real, float* rows, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* row;
    if constexpr (kIsF32<T>) row = x + n * Vs;
    else row = widened_row(x, n, Vs, real, rows);
    float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
    for (std::int64_t j = 0; j < real; ++j) mx = std::max(mx, row[j]);
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t j = 0; j < real; ++j) sum += fast_exp(row[j] - mx);
    stats[3 * n] = mx;
    stats[3 * n + 1] = static_cast<float>(sum);
    stats[3 * n + 2] = t[n] >= 0 ? row[t[n]] : 0.0f;  // check_slice: a column >= 0 is < real
    if (xs == nullptr) continue;
    double xsum = 0.0;
    for (std::int64_t j = 0; j < real; ++j) {
      const float d = row[j] - mx;
      if (row[j] != -std::numeric_limits<float>::infinity()) xsum += static_cast<double>(fast_exp(d)) * d;
    }
    xs[n] = static_cast<float>(xsum);
  }
}

// The entropy term's row inputs (backend.hpp's EntropyGrad): null when there is none.
struct EntropyRows {
  const float* entropy = nullptr;
  const float* scale = nullptr;
};

// drow[j] = dloss * p_j + dent * p_j (lse - H - row[j]) for j < real, p_j = exp(row[j] - lse): the softmax
// part and the entropy's, in one pass (drow may be row itself: each element is read before it is written).
ZT_SIMD_CLONES void row_softmax_entropy(float* drow, const float* row, std::int64_t real, float lse, float dloss,
                                        float entropy, float dent) {
#pragma omp simd
  for (std::int64_t j = 0; j < real; ++j) {
    const float x = row[j], p = fast_exp(x - lse);
    drow[j] = dloss * p + dent * p * (lse - entropy - x);
  }
}

// As ce_backward_rows with the whole vocabulary's lse given and the target possibly elsewhere.
template <typename T>
void slice_backward_rows(T* dx, const T* x, const std::int32_t* t, const float* lse, float dloss_all, const float* scale,
                         EntropyRows ent, std::int64_t N, std::int64_t Vs, int real, float* rows, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float dloss = scale != nullptr ? dloss_all * scale[n] : dloss_all;
    if (t[n] == kIgnoreTarget) {
      std::fill_n(dx + n * Vs, Vs, store<T>(0.0f));
      continue;
    }
    const float* row;
    float* drow;
    if constexpr (kIsF32<T>) row = x + n * Vs, drow = dx + n * Vs;
    else row = drow = widened_row(x, n, Vs, real, rows);
    if (ent.scale != nullptr) row_softmax_entropy(drow, row, real, lse[n], dloss, ent.entropy[n], dloss_all * ent.scale[n]);
    else row_softmax_scaled(drow, row, real, lse[n], dloss);
    if (t[n] >= 0) drow[t[n]] -= dloss;
    for (std::int64_t j = real; j < Vs; ++j) drow[j] = 0.0f;
    if constexpr (!kIsF32<T>)
      for (std::int64_t j = 0; j < Vs; ++j) dx[n * Vs + j] = store<T>(drow[j]);
  }
}

}  // namespace

void CpuBackend::cross_entropy_slice_stats(Tensor stats, Tensor logits, Tensor targets, int real, Tensor xsum) {
  const char* op = "cross_entropy_slice_stats";
  check_slice(op, logits, targets, real);
  const std::int64_t N = rows_of(logits), Vs = logits.dim(-1);
  ZT_CHECK_EQ(stats.numel(), 3 * N, op, ": stats ", stats.shape_string(), " needs 3 per row");
  if (!xsum.empty()) ZT_CHECK_EQ(xsum.numel(), N, op, ": xsum ", xsum.shape_string(), " needs one per row");
  const DType x = compute_dtype(op, {{"logits", logits, Role::kCompute}, {"stats", stats, Role::kF32}});
  float* rows = x == DType::kF32 ? nullptr : workspace(cross_entropy_x_floats(threads_, Vs));
  float* xs = xsum.empty() ? nullptr : xsum.f32(op);
  with_storage(x, [&](auto tag) {
    slice_stats_rows(stats.f32(op), xs, data_as<decltype(tag)>(logits), targets.i32(op), N, Vs, real, rows, threads_);
  });
}

// row_scale [N] f32 (optional): each row's dloss times its entry.
static const float* row_scale_of(const char* op, const Tensor& row_scale, std::int64_t N) {
  if (row_scale.empty()) return nullptr;
  ZT_CHECK_EQ(row_scale.numel(), N, op, ": row_scale ", row_scale.shape_string(), " needs one per row");
  return row_scale.f32(op);
}

void CpuBackend::cross_entropy_slice_backward(Tensor dlogits, Tensor logits, Tensor targets, Tensor lse, float dloss,
                                              int real, Tensor row_scale, const EntropyGrad& entropy) {
  const char* op = "cross_entropy_slice_backward";
  check_slice(op, logits, targets, real);
  const std::int64_t N = rows_of(logits), Vs = logits.dim(-1);
  expect_rows(op, "dlogits", dlogits, N, Vs);
  ZT_CHECK_EQ(lse.numel(), N, op, ": lse ", lse.shape_string(), " needs one per row");
  const DType x = compute_dtype(op, {{"dlogits", dlogits, Role::kCompute}, {"logits", logits, Role::kCompute},
                                     {"lse", lse, Role::kF32}});
  EntropyRows ent;
  if (!entropy.empty()) {
    ZT_CHECK(entropy.entropy.numel() == N && entropy.scale.numel() == N, op, ": the entropy term's entropy ",
             entropy.entropy.shape_string(), " and scale ", entropy.scale.shape_string(), " need one per row");
    ent = {entropy.entropy.f32(op), entropy.scale.f32(op)};
  }
  float* rows = x == DType::kF32 ? nullptr : workspace(cross_entropy_x_floats(threads_, Vs));
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    slice_backward_rows(data_as<T>(dlogits), data_as<T>(logits), targets.i32(op), lse.f32(op), dloss,
                        row_scale_of(op, row_scale, N), ent, N, Vs, real, rows, threads_);
  });
}

// losses[n] = logsumexp(logits[n, :V]) - logits[n, targets[n]]
void CpuBackend::cross_entropy_forward(Tensor losses, Tensor logits, Tensor targets, int vocab) {
  const char* op = "cross_entropy_forward";
  check_ce(op, logits, targets, vocab);
  const std::int64_t N = rows_of(logits), Vp = logits.dim(-1);
  ZT_CHECK_EQ(losses.numel(), N, op, ": losses ", losses.shape_string(), " needs one per row");
  const DType x = compute_dtype(op, {{"logits", logits, Role::kCompute}, {"losses", losses, Role::kF32}});
  float* rows = x == DType::kF32 ? nullptr : workspace(cross_entropy_x_floats(threads_, Vp));
  with_storage(x, [&](auto tag) {
    ce_forward_rows(losses.f32(op), data_as<decltype(tag)>(logits), targets.i32(op), N, Vp, vocab, rows, threads_);
  });
}

// dlogits[n, j] = dloss * (softmax(logits[n, :V])_j - [j == target]) for j < V, 0 for padded j.
// In place is allowed: the row's lse is found before any of its elements is overwritten.
void CpuBackend::cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor targets, float dloss, int vocab,
                                        Tensor row_scale) {
  const char* op = "cross_entropy_backward";
  check_ce(op, logits, targets, vocab);
  const std::int64_t N = rows_of(logits), Vp = logits.dim(-1);
  expect_rows(op, "dlogits", dlogits, N, Vp);
  const DType x = compute_dtype(op, {{"dlogits", dlogits, Role::kCompute}, {"logits", logits, Role::kCompute}});
  float* rows = x == DType::kF32 ? nullptr : workspace(cross_entropy_x_floats(threads_, Vp));
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    ce_backward_rows(data_as<T>(dlogits), data_as<T>(logits), targets.i32(op), dloss, row_scale_of(op, row_scale, N), N,
                     Vp, vocab, rows, threads_);
  });
}

}  // namespace zt::backend::cpu
