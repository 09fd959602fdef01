// Vocabulary-parallel embedding and cross-entropy (vocab_parallel.hpp).
#include "tp/vocab_parallel.hpp"

#include <algorithm>
#include <cmath>

#include "backend/host_convert.hpp"
#include "core/error.hpp"
#include "model/lm_head.hpp"

namespace zt::tp {

using backend::Tensor;

namespace {
// all = every rank's `mine`, in group rank order. The group's communicator takes device memory (NCCL
// takes device pointers; the host-staged MPI one copies from the device), so the host values travel
// through a device buffer (on the CPU backend the copies are memcpy).
void all_gather_host(const TpContext& ctx, const std::vector<float>& mine, std::vector<float>& all) {
  backend::Buffer staging = ctx.be.allocate((mine.size() + all.size()) * sizeof(float));
  float* on_device = static_cast<float*>(staging.data());  // [mine | all]
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

void vocab_parallel_embed_tokens(const TpContext& ctx, Tensor out, Tensor partial, const std::int32_t* tokens,
                                 std::int64_t vocab_size, Tensor rows, Tensor wte_ext, Tensor wpe) {
  const std::int64_t n = rows.numel(), Vs = wte_ext.dim(0) - 1;
  model::check_token_ids("token", tokens, n, vocab_size);
  const std::vector<std::int32_t> local = local_token_rows(tokens, n, ctx.group.rank() * Vs, Vs);
  ctx.be.copy_from_host(rows.data, local.data(), rows.bytes());
  vocab_parallel_embedding_forward(ctx, out, partial, rows, wte_ext, wpe);
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

// The device holds [N] lse f32 | [N] target columns i32 | [3N] slice statistics f32 (grown as needed).
void VocabParallelCrossEntropy::bind(backend::Backend& be, std::int64_t N) {
  const std::size_t bytes = static_cast<std::size_t>(5 * N) * sizeof(float);
  if (device_.bytes() < bytes) device_ = be.allocate(bytes);
  float* base = static_cast<float*>(device_.data());
  lse_ = Tensor(base, DType::kF32, {N});
  targets_ = Tensor(base + N, DType::kI32, {N});
  stats_ = Tensor(base + 2 * N, DType::kF32, {N, 3});
}

std::vector<float> VocabParallelCrossEntropy::forward(const TpContext& ctx, Tensor logits, const std::int32_t* targets,
                                                      std::int64_t lo, std::int64_t vocab) {
  const std::int64_t Vs = logits.dim(-1), N = logits.numel() / Vs;
  real_ = static_cast<int>(std::clamp<std::int64_t>(vocab - lo, 0, Vs));  // columns that are real ids
  bind(ctx.be, N);
  std::vector<std::int32_t> columns(static_cast<std::size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) {
    const std::int64_t c = targets[n] - lo;
    columns[n] = targets[n] == backend::kIgnoreTarget ? backend::kIgnoreTarget
                 : c >= 0 && c < real_              ? static_cast<std::int32_t>(c)
                                                    : backend::kTargetInOtherSlice;
  }
  ctx.be.copy_from_host(targets_.data, columns.data(), columns.size() * sizeof(std::int32_t));
  // This slice's (max, sum of exp(l - max), target logit) per row, on the device; 3N floats come back.
  ctx.be.cross_entropy_slice_stats(stats_, logits, targets_, real_);
  std::vector<float> stats(static_cast<std::size_t>(3 * N));
  ctx.be.copy_to_host(stats.data(), stats_.data, stats.size() * sizeof(float));
  std::vector<double> max(static_cast<std::size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) max[n] = stats[3 * n];
  const bool alone = ctx.group.size() == 1;  // tp = 1: nothing to combine
  if (!alone) ctx.group.all_reduce_values(max, dist::ReduceOp::kMax);
  std::vector<double> sums(static_cast<std::size_t>(2 * N), 0.0);  // [sum exp(l - M) | target logit]
  for (std::int64_t n = 0; n < N; ++n) {
    if (real_ > 0) sums[n] = stats[3 * n + 1] * std::exp(stats[3 * n] - max[n]);
    sums[N + n] = stats[3 * n + 2];
  }
  if (!alone) ctx.group.all_reduce_values(sums, dist::ReduceOp::kSum);
  std::vector<float> lse(static_cast<std::size_t>(N)), losses(static_cast<std::size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) {
    const double row_lse = max[n] + std::log(sums[n]);
    lse[n] = static_cast<float>(row_lse);
    losses[n] = targets[n] == backend::kIgnoreTarget ? 0.f : static_cast<float>(row_lse - sums[N + n]);  // mask
  }
  ctx.be.copy_from_host(lse_.data, lse.data(), lse.size() * sizeof(float));
  rows_ = N;
  return losses;
}

void VocabParallelCrossEntropy::backward(const TpContext& ctx, Tensor dlogits, Tensor logits, float dloss) {
  const std::int64_t Vs = logits.dim(-1), N = logits.numel() / Vs;
  ZT_CHECK_EQ(N, rows_, "vocab-parallel cross-entropy: backward without forward");
  ctx.be.cross_entropy_slice_backward(dlogits, logits, targets_, lse_, dloss, real_);
}

}  // namespace zt::tp
