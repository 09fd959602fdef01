// Vocabulary-parallel embedding and cross-entropy (vocab_parallel.hpp).
#include "tp/vocab_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/host_convert.hpp"
#include "core/error.hpp"

namespace zt::tp {

using backend::Tensor;

namespace {
// The group's communicator reads and writes device memory (NCCL takes device pointers; the host-staged
// MPI one copies from the device), so the host values the cross-entropy and the logits gather combine
// travel through a device buffer of this rank's own (`staging`, grown as needed). On the CPU backend the
// copies are memcpy: the same values as handing over the host vectors.
float* staged(backend::Backend& be, backend::Buffer& staging, std::size_t count) {
  if (staging.bytes() < count * sizeof(float)) staging = be.allocate(count * sizeof(float));
  return static_cast<float*>(staging.data());
}

void all_reduce_host(const TpContext& ctx, backend::Buffer& staging, std::vector<float>& values, dist::ReduceOp op) {
  float* on_device = staged(ctx.be, staging, values.size());
  ctx.be.copy_from_host(on_device, values.data(), values.size() * sizeof(float));
  ctx.group.all_reduce(dist::span_of(on_device, values.size()), op)->wait();
  ctx.be.copy_to_host(values.data(), on_device, values.size() * sizeof(float));
}

// all = every rank's `mine`, in group rank order.
void all_gather_host(const TpContext& ctx, const std::vector<float>& mine, std::vector<float>& all) {
  backend::Buffer staging;
  float* on_device = staged(ctx.be, staging, mine.size() + all.size());  // [mine | all]
  ctx.be.copy_from_host(on_device, mine.data(), mine.size() * sizeof(float));
  ctx.group.all_gather(dist::span_of(on_device, mine.size()), dist::span_of(on_device + mine.size(), all.size()))->wait();
  ctx.be.copy_to_host(all.data(), on_device + mine.size(), all.size() * sizeof(float));
}
}  // namespace

std::vector<std::int32_t> local_token_rows(const std::int32_t* tokens, std::int64_t n, std::int64_t lo, std::int64_t Vs) {
  std::vector<std::int32_t> rows(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    rows[i] = static_cast<std::int32_t>(tokens[i] >= lo && tokens[i] < lo + Vs ? tokens[i] - lo : Vs);
  return rows;
}

void vocab_parallel_embedding_forward(const TpContext& ctx, Tensor out, Tensor partial, Tensor rows, Tensor wte_ext,
                                      Tensor wpe) {
  const Tensor sum = ctx.sequence_parallel ? partial : out;
  ctx.be.embedding_forward(sum, rows, wte_ext, ctx.group.rank() == 0 ? wpe : Tensor{});
  if (ctx.sequence_parallel) reduce_scatter_rows(ctx, partial, out);
  else all_reduce_sum(ctx, out);
}

void vocab_parallel_embedding_backward(const TpContext& ctx, Tensor dwte_ext, Tensor dwpe, Tensor dout, Tensor dfull,
                                       Tensor rows) {
  if (ctx.sequence_parallel) gather_rows(ctx, dout, dfull);
  ctx.be.embedding_backward(dwte_ext, dwpe, ctx.sequence_parallel ? dfull : dout, rows);
  const std::int64_t Vs = dwte_ext.dim(0) - 1, C = dwte_ext.dim(1);
  // The zero row collected the tokens of other ranks' blocks: not a parameter's gradient.
  Tensor zero_row = dwte_ext;
  zero_row.data = static_cast<char*>(dwte_ext.data) + Vs * C * dtype_size(dwte_ext.dtype);
  zero_row.rank = 1;
  zero_row.shape = {C, 0, 0, 0};
  ctx.be.fill_zero(zero_row);
}

std::vector<float> gather_logits(const TpContext& ctx, Tensor logits, std::int64_t vocab) {
  const std::int64_t Vs = logits.dim(-1), N = logits.numel() / Vs;
  std::vector<float> mine(static_cast<std::size_t>(N * Vs)), all(mine.size() * ctx.group.size());
  std::vector<float> out(static_cast<std::size_t>(N * vocab));
  backend::copy_to_host_as_f32(ctx.be, mine.data(), logits);
  all_gather_host(ctx, mine, all);
  for (std::int64_t n = 0; n < N; ++n)  // rank q's block [N, Vs] holds ids q*Vs ...
    for (std::int64_t v = 0; v < vocab; ++v) out[n * vocab + v] = all[(v / Vs) * N * Vs + n * Vs + v % Vs];
  return out;
}

std::vector<float> VocabParallelCrossEntropy::forward(const TpContext& ctx, Tensor logits, const std::int32_t* targets,
                                                      std::int64_t lo, std::int64_t vocab) {
  const std::int64_t Vs = logits.dim(-1), N = logits.numel() / Vs;
  const std::int64_t real = std::clamp<std::int64_t>(vocab - lo, 0, Vs);  // columns that are real ids
  std::vector<float> l(static_cast<std::size_t>(N * Vs));
  backend::copy_to_host_as_f32(ctx.be, l.data(), logits);
  // Per row: the group's max logit, then the sum of exp(l - max) and the target's logit.
  std::vector<float> max(static_cast<std::size_t>(N), -std::numeric_limits<float>::infinity());
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t j = 0; j < real; ++j) max[n] = std::max(max[n], l[n * Vs + j]);
  const bool alone = ctx.group.size() == 1;  // tp = 1: nothing to combine
  if (!alone) all_reduce_host(ctx, staging_, max, dist::ReduceOp::kMax);
  std::vector<float> sums(static_cast<std::size_t>(2 * N), 0.f);  // [sum exp | target logit]
  for (std::int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (std::int64_t j = 0; j < real; ++j) s += std::exp(static_cast<double>(l[n * Vs + j]) - max[n]);
    sums[n] = static_cast<float>(s);
    const std::int64_t t = targets[n] - lo;
    if (t >= 0 && t < real) sums[N + n] = l[n * Vs + t];
  }
  if (!alone) all_reduce_host(ctx, staging_, sums, dist::ReduceOp::kSum);
  lse_.resize(static_cast<std::size_t>(N));
  std::vector<float> losses(static_cast<std::size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) {
    lse_[n] = max[n] + std::log(sums[n]);
    losses[n] = targets[n] == backend::kIgnoreTarget ? 0.f : lse_[n] - sums[N + n];  // outside the loss mask
  }
  targets_.assign(targets, targets + N);
  lo_ = lo, vocab_ = vocab;
  return losses;
}

void VocabParallelCrossEntropy::backward(const TpContext& ctx, Tensor dlogits, Tensor logits, float dloss) {
  const std::int64_t Vs = logits.dim(-1), N = logits.numel() / Vs;
  ZT_CHECK_EQ(static_cast<std::size_t>(N), lse_.size(), "vocab-parallel cross-entropy: backward without forward");
  ZT_CHECK_EQ(dlogits.numel(), logits.numel(), "vocab-parallel cross-entropy: dlogits must be shaped as logits");
  const std::int64_t real = std::clamp<std::int64_t>(vocab_ - lo_, 0, Vs);
  std::vector<float> g(static_cast<std::size_t>(N * Vs));
  backend::copy_to_host_as_f32(ctx.be, g.data(), logits);
  for (std::int64_t n = 0; n < N; ++n) {
    float* row = g.data() + n * Vs;
    if (targets_[n] == backend::kIgnoreTarget) {  // outside the loss mask: no gradient
      std::fill(row, row + Vs, 0.f);
      continue;
    }
    for (std::int64_t j = 0; j < Vs; ++j)
      row[j] = j < real ? dloss * (std::exp(row[j] - lse_[n]) - (targets_[n] - lo_ == j ? 1.f : 0.f)) : 0.f;
  }
  backend::copy_from_host_f32(ctx.be, dlogits, g.data());
}

}  // namespace zt::tp
