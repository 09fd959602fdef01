// The LM head and cross-entropy in vocabulary chunks (chunked_lm_loss.hpp).
#include "layers/chunked_lm_loss.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/op_checks.hpp"
#include "core/error.hpp"
#include "layers/vocab_parallel.hpp"

namespace zt::layers {

using backend::Tensor;
using backend::WeightLayout;

namespace {

// Rows [first, first + count) of a row-major matrix [R, C].
Tensor row_block(const Tensor& m, std::int64_t first, std::int64_t count) {
  const std::int64_t C = m.dim(-1);
  return Tensor(static_cast<char*>(m.data) + first * C * static_cast<std::int64_t>(dtype_size(m.dtype)), m.dtype,
                {count, C});
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

Tensor WholeHead::weight(std::int64_t, std::int64_t first, std::int64_t width) { return row_block(weight_, first, width); }
Tensor WholeHead::grad(std::int64_t, std::int64_t first, std::int64_t width) {
  return dweight_.empty() ? Tensor() : row_block(dweight_, first, width);
}

std::int64_t loss_chunk_columns(std::int64_t held, std::int64_t key) {
  ZT_CHECK(held >= 1 && key >= 0, "loss_chunk_columns: held=", held, " key=", key);
  if (key > 0) return std::min(key, held);
  return held <= kLossChunkAutoWhole ? held : kLossChunkAutoColumns;
}

std::int64_t loss_chunks(std::int64_t held, std::int64_t lo, std::int64_t vocab, std::int64_t chunk) {
  const std::int64_t real = std::clamp<std::int64_t>(vocab - lo, 0, held);  // held rows that are ids
  return ceil_div(real, chunk);
}

std::size_t ChunkedLmLoss::bytes(std::int64_t rows, std::int64_t channels, std::int64_t held, std::int64_t chunk,
                                 DType x) {
  const std::int64_t width = std::min(chunk, held), n_chunks = ceil_div(held, width);
  std::size_t total = static_cast<std::size_t>(rows * width) * dtype_size(x);
  total += static_cast<std::size_t>(20 * rows * n_chunks + 8 * rows);
  if (x != DType::kF32 && n_chunks > 1) total += static_cast<std::size_t>(4 * rows * channels);
  return total;
}

ChunkedLmLoss::ChunkedLmLoss(backend::Backend& be, std::int64_t chunk) : be_(be), chunk_(chunk) {
  ZT_CHECK_GT(chunk, 0, "ChunkedLmLoss: chunk=", chunk, " must be positive");
}

void ChunkedLmLoss::reserve(std::int64_t rows, std::int64_t channels, std::int64_t held, DType x) {
  const std::int64_t width = std::min(chunk_, held), chunks = ceil_div(held, width);
  bind(rows, chunks, width, x);
  if (x != DType::kF32 && chunks > 1 && sum_buf_.bytes() == 0)
    sum_buf_ = be_.allocate(static_cast<std::size_t>(rows * channels) * sizeof(float));
}

ChunkedLmLoss::Chunk ChunkedLmLoss::chunk_at(std::int64_t k) const {
  const std::int64_t first = k * chunk_, width = std::min(chunk_, held_ - first);
  return {first, width, std::clamp<std::int64_t>(vocab_ - lo_ - first, 0, width)};
}

// rows_buf_ holds [n_c, N] i32 target columns | [n_c, N, 3] f32 statistics | [N] f32 lse | [N] f32
// entropy | [n_c, N] f32 entropy statistics.
void ChunkedLmLoss::bind(std::int64_t rows, std::int64_t chunks, std::int64_t width, DType x) {
  const std::size_t logit_bytes = static_cast<std::size_t>(rows * width) * dtype_size(x);
  const std::size_t row_bytes = static_cast<std::size_t>((5 * chunks + 2) * rows) * sizeof(float);
  if (logits_buf_.bytes() < logit_bytes) logits_buf_.reset(), logits_buf_ = be_.allocate(logit_bytes);
  if (rows_buf_.bytes() < row_bytes) rows_buf_.reset(), rows_buf_ = be_.allocate(row_bytes);
}

Tensor ChunkedLmLoss::logits(std::int64_t width) const {
  return Tensor(logits_buf_.data(), dtype_, {rows_, width});
}
Tensor ChunkedLmLoss::targets(std::int64_t k) const {
  return Tensor(static_cast<std::int32_t*>(rows_buf_.data()) + k * rows_, DType::kI32, {rows_});
}
Tensor ChunkedLmLoss::stats(std::int64_t k) const {
  float* base = static_cast<float*>(rows_buf_.data()) + n_chunks_ * rows_;
  return Tensor(base + 3 * k * rows_, DType::kF32, {rows_, 3});
}
Tensor ChunkedLmLoss::lse() const {
  return Tensor(static_cast<float*>(rows_buf_.data()) + 4 * n_chunks_ * rows_, DType::kF32, {rows_});
}
Tensor ChunkedLmLoss::entropy() const {
  return Tensor(static_cast<float*>(rows_buf_.data()) + (4 * n_chunks_ + 1) * rows_, DType::kF32, {rows_});
}
Tensor ChunkedLmLoss::xsums(std::int64_t k) const {
  return Tensor(static_cast<float*>(rows_buf_.data()) + (4 * n_chunks_ + 2 + k) * rows_, DType::kF32, {rows_});
}

void ChunkedLmLoss::compute_logits(const Chunk& c, const Tensor& x, const Tensor& w) {
  ZT_CHECK(w.rank == 2 && w.dim(0) == c.width && w.dim(1) == x.dim(-1) && w.dtype == x.dtype, "chunked LM loss: ",
           "the head's rows ", w.shape_string(), " ", dtype_name(w.dtype), " do not fit x ", x.shape_string(), " ",
           dtype_name(x.dtype), " (", c.width, " rows from ", c.first, ")");
  be_.matmul_forward(logits(c.width), x, w, Tensor(), WeightLayout::kOutIn);
}

std::vector<float> ChunkedLmLoss::forward(Tensor x, Tensor weight, const std::int32_t* targets_host, std::int64_t lo,
                                          std::int64_t vocab, const RowReduce* reduce, bool entropy) {
  ZT_CHECK(weight.rank == 2 && weight.dim(1) == x.dim(-1) && weight.dtype == x.dtype, "chunked LM loss: weight ",
           weight.shape_string(), " ", dtype_name(weight.dtype), " does not fit x ", x.shape_string(), " ",
           dtype_name(x.dtype));
  WholeHead head(weight, Tensor());
  return forward(x, head, weight.dim(0), targets_host, lo, vocab, reduce, entropy);
}

std::vector<float> ChunkedLmLoss::forward(Tensor x, HeadRows& head, std::int64_t held, const std::int32_t* targets_host,
                                          std::int64_t lo, std::int64_t vocab, const RowReduce* reduce, bool entropy) {
  const char* who = "chunked LM loss";
  ZT_CHECK(reduce == nullptr || (reduce->max && reduce->sum), who, ": a RowReduce needs both max and sum");
  const std::int64_t N = backend::rows_of(x);
  ready_ = false;
  held_ = held, lo_ = lo, vocab_ = vocab, dtype_ = x.dtype;
  ZT_CHECK(reduce != nullptr || (lo == 0 && vocab <= held_), who, ": without a tensor-parallel hook the rank must ",
           "hold the whole vocabulary (lo=", lo, ", vocab=", vocab, ", held rows=", held_, ")");
  check_target_ids(targets_host, N, vocab);
  n_chunks_ = N == 0 ? 0 : loss_chunks(held_, lo, vocab, chunk_);
  exact_ = reduce == nullptr && n_chunks_ == 1 && !entropy;
  entropy_ = entropy;
  entropies_.clear();
  rows_ = N, ready_ = N == 0;
  if (N == 0) return {};
  bind(N, n_chunks_, std::min(chunk_, held_), x.dtype);
  // Every chunk's target columns, copied once: the target's column in the chunk, or -2 / -1 (backend.hpp).
  std::vector<std::int32_t> columns(static_cast<std::size_t>(n_chunks_ * N));
  for (std::int64_t k = 0; k < n_chunks_; ++k) {
    const Chunk c = chunk_at(k);
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int64_t col = targets_host[n] - lo - c.first;
      columns[k * N + n] = targets_host[n] == backend::kIgnoreTarget ? backend::kIgnoreTarget
                           : col >= 0 && col < c.real                  ? static_cast<std::int32_t>(col)
                                                                       : backend::kTargetInOtherSlice;
    }
  }
  if (!columns.empty()) be_.copy_from_host(rows_buf_.data(), columns.data(), columns.size() * sizeof(std::int32_t));
  for (std::int64_t k = 0; k < n_chunks_; ++k) {
    const Chunk c = chunk_at(k);
    compute_logits(c, x, head.weight(k, c.first, c.width));
    head.release(k);
    if (exact_) {  // today's op; its losses land in chunk 0's statistics block
      const Tensor losses(stats(0).data, DType::kF32, {N});
      be_.cross_entropy_forward(losses, logits(c.width), targets(0), static_cast<int>(c.real));
      std::vector<float> out(static_cast<std::size_t>(N));
      be_.copy_to_host(out.data(), losses.data, losses.bytes());
      kept_ = 0, ready_ = true;
      return out;
    }
    be_.cross_entropy_slice_stats(stats(k), logits(c.width), targets(k), static_cast<int>(c.real),
                                  entropy ? xsums(k) : Tensor());
  }
  kept_ = n_chunks_ - 1;
  std::vector<float> losses = combine(targets_host, reduce);
  ready_ = true;
  return losses;
}

// The rows' statistics over the chunks (M = max, S = sum of exp(l - M), Z = target logit and, with
// entropies, T = sum of exp(l - M) (l - M)), then over the TP group exactly as
// VocabParallelCrossEntropy::forward combines slices; lse [N] (and the entropy) go to the device. A part
// taken to a larger max M' rescales as S' = S e^(M - M'), T' = e^(M - M') (T + (M - M') S); then
// lse = M + log S and H = log S - T / S.
std::vector<float> ChunkedLmLoss::combine(const std::int32_t* targets_host, const RowReduce* reduce) {
  const std::int64_t N = rows_;
  std::vector<float> st(static_cast<std::size_t>(3 * n_chunks_ * N));
  std::vector<float> xs(entropy_ ? static_cast<std::size_t>(n_chunks_ * N) : 0);
  if (!st.empty()) be_.copy_to_host(st.data(), stats(0).data, st.size() * sizeof(float));
  if (!xs.empty()) be_.copy_to_host(xs.data(), xsums(0).data, xs.size() * sizeof(float));
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> mine(static_cast<std::size_t>(N), -inf), max(static_cast<std::size_t>(N), -inf);
  // [S | Z | T]: T only with entropies (the TP hook sums what is there).
  std::vector<double> sums(static_cast<std::size_t>((entropy_ ? 3 : 2) * N), 0.0);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t k = 0; k < n_chunks_; ++k) mine[n] = std::max<double>(mine[n], st[3 * (k * N + n)]);
    double s = 0.0, z = 0.0, t = 0.0;
    for (std::int64_t k = 0; k < n_chunks_; ++k) {
      const float* row = &st[3 * (k * N + n)];
      s += row[1] * std::exp(row[0] - mine[n]);
      z += row[2];
      if (entropy_ && row[1] > 0)  // a part without ids adds nothing (its (m - M) S would be NaN)
        t += std::exp(row[0] - mine[n]) * (xs[k * N + n] + (row[0] - mine[n]) * row[1]);
    }
    max[n] = mine[n], sums[n] = s, sums[N + n] = z;
    if (entropy_) sums[2 * N + n] = t;
  }
  if (reduce != nullptr) {
    reduce->max(max);
    for (std::int64_t n = 0; n < N; ++n) {
      const double shift = mine[n] - max[n];  // a rank without ids adds 0
      if (entropy_) sums[2 * N + n] = n_chunks_ > 0 ? std::exp(shift) * (sums[2 * N + n] + shift * sums[n]) : 0.0;
      sums[n] = n_chunks_ > 0 ? sums[n] * std::exp(shift) : 0.0;
    }
    reduce->sum(sums);
  }
  std::vector<float> lses(static_cast<std::size_t>(N)), losses(static_cast<std::size_t>(N));
  if (entropy_) entropies_.assign(static_cast<std::size_t>(N), 0.0f);
  for (std::int64_t n = 0; n < N; ++n) {
    const double row_lse = max[n] + std::log(sums[n]);
    lses[n] = static_cast<float>(row_lse);
    const bool ignored = targets_host[n] == backend::kIgnoreTarget;
    losses[n] = ignored ? 0.f : static_cast<float>(row_lse - sums[N + n]);
    if (entropy_ && !ignored) entropies_[n] = static_cast<float>(std::log(sums[n]) - sums[2 * N + n] / sums[n]);
  }
  be_.copy_from_host(lse().data, lses.data(), lses.size() * sizeof(float));
  if (entropy_) be_.copy_from_host(entropy().data, entropies_.data(), entropies_.size() * sizeof(float));
  return losses;
}

// One chunk: the forward's logits are still there; dlogits in place, then matmul_backward as today.
void ChunkedLmLoss::backward_whole(Tensor dx, const Tensor& x, HeadRows& head, float dloss, const Tensor& row_scale,
                                   const backend::Backend::EntropyGrad& entropy) {
  const Chunk c = chunk_at(0);
  const Tensor l = logits(c.width);
  if (exact_) be_.cross_entropy_backward(l, l, targets(0), dloss, static_cast<int>(c.real), row_scale);
  else be_.cross_entropy_slice_backward(l, l, targets(0), lse(), dloss, static_cast<int>(c.real), row_scale, entropy);
  const Tensor w = head.weight(0, c.first, c.width);  // separate statements: the rows before their gradient
  const Tensor g = head.grad(0, c.first, c.width);
  be_.matmul_backward(dx, g, Tensor(), l, x, w, WeightLayout::kOutIn);
  head.release(0);
  head.grad_done(0);
}

void ChunkedLmLoss::backward(Tensor dx, Tensor dweight, Tensor x, Tensor weight, float dloss, Tensor row_scale,
                             Tensor entropy_scale) {
  const char* who = "chunked LM loss";
  ZT_CHECK(weight.dim(0) == held_, who, ": backward needs the forward of the same rows and head just before it");
  if (!dweight.empty()) backend::expect_shape(who, "dweight", dweight, {held_, weight.dim(1)});
  if (dx.empty() && dweight.empty()) {  // nothing asked: the forward's state is spent all the same
    ready_ = false;
    return;
  }
  WholeHead head(weight, dweight);
  backward(dx, x, head, dloss, row_scale, entropy_scale);
}

void ChunkedLmLoss::backward(Tensor dx, const Tensor& x, HeadRows& head, float dloss, Tensor row_scale,
                             Tensor entropy_scale) {
  const char* who = "chunked LM loss";
  ZT_CHECK(ready_ && backend::rows_of(x) == rows_, who,
           ": backward needs the forward of the same rows and head just before it");
  if (!dx.empty()) backend::expect_rows(who, "dx", dx, rows_, x.dim(-1));
  ZT_CHECK(entropy_scale.empty() || entropy_, who, ": an entropy term needs a forward that computed entropies");
  const std::int64_t N = rows_;
  ready_ = false;  // the chunk buffer is about to hold gradients
  if (N == 0) return;
  if (n_chunks_ == 0) {  // no real id here: this rank's share of dx is 0, dweight gets nothing
    if (!dx.empty()) be_.fill_zero(dx);
    return;
  }
  if (!row_scale.empty()) backend::expect_shape(who, "row_scale", row_scale, {N});
  if (!entropy_scale.empty()) backend::expect_shape(who, "entropy_scale", entropy_scale, {N});
  const backend::Backend::EntropyGrad ent =
      entropy_scale.empty() ? backend::Backend::EntropyGrad() : backend::Backend::EntropyGrad{entropy(), entropy_scale};
  if (n_chunks_ == 1) return backward_whole(dx, x, head, dloss, row_scale, ent);
  // d(x) summed over the chunks in fp32, rounded to X once at the end (dx itself when X is f32).
  Tensor sum = dx;
  if (!dx.empty() && dx.dtype != DType::kF32) {
    const std::size_t bytes = static_cast<std::size_t>(N * x.dim(-1)) * sizeof(float);
    if (sum_buf_.bytes() < bytes) sum_buf_.reset(), sum_buf_ = be_.allocate(bytes);
    sum = Tensor(sum_buf_.data(), DType::kF32, {N, x.dim(-1)});
  }
  if (!sum.empty()) be_.fill_zero(sum);
  for (std::int64_t k = n_chunks_ - 1; k >= 0; --k) {  // the last chunk first: forward left its logits
    const Chunk c = chunk_at(k);
    const Tensor l = logits(c.width), w = head.weight(k, c.first, c.width);
    const Tensor g = head.grad(k, c.first, c.width);
    if (k != kept_) compute_logits(c, x, w);
    be_.cross_entropy_slice_backward(l, l, targets(k), lse(), dloss, static_cast<int>(c.real), row_scale, ent);
    if (!g.empty()) be_.matmul_backward(Tensor(), g, Tensor(), l, x, w, WeightLayout::kOutIn);
    if (!sum.empty()) be_.matmul_backward_input_accumulate(sum, l, w, WeightLayout::kOutIn);
    head.release(k);
    head.grad_done(k);
  }
  kept_ = -1;
  if (!dx.empty() && dx.dtype != DType::kF32) be_.cast(dx, sum);
}

}  // namespace zt::layers
