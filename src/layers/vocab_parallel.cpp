// The vocabulary-parallel embedding and cross-entropy (vocab_parallel.hpp).
#include "layers/vocab_parallel.hpp"

#include <algorithm>

#include "backend/host_convert.hpp"
#include "core/error.hpp"

namespace zt::layers {

using backend::Tensor;

namespace {
// all = every rank's `mine`, in group rank order. The group's communicator takes device memory (NCCL
// takes device pointers; the host-staged MPI one copies from the device), so the host values travel
// through a device buffer (on the CPU backend the copies are memcpy).
void all_gather_host(const TpContext& ctx, const std::vector<float>& mine, std::vector<float>& all) {
  backend::Buffer staging = ctx.be.allocate((mine.size() + all.size()) * sizeof(float));
  float* on_device = static_cast<float*>(staging.data());  // [mine | all]
  ctx.be.copy_from_host(on_device, mine.data(), mine.size() * sizeof(float));
  ctx.group->all_gather(dist::span_of(on_device, mine.size()), dist::span_of(on_device + mine.size(), all.size()))->wait();
  ctx.be.copy_to_host(all.data(), on_device + mine.size(), all.size() * sizeof(float));
}

Tensor as_batch_rows(Tensor t, const Tensor& ids) {  // [N, C] seen as [B, T, C], the embedding op's shape
  return Tensor(t.data, t.dtype, {ids.dim(0), ids.dim(1), t.dim(-1)});
}
}  // namespace

void check_token_ids(const char* what, const std::int32_t* ids, std::int64_t n, std::int64_t vocab_size) {
  ZT_CHECK(ids != nullptr, "model: ", what, " ids must not be null");
  for (std::int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw DataError(cat("model: ", what, " id ", ids[i], " at position ", i, " of the micro-batch is outside [0, ",
                          vocab_size, "); check that the data was tokenized for this vocabulary"));
}

void check_target_ids(const std::int32_t* ids, std::int64_t n, std::int64_t vocab_size) {
  ZT_CHECK(ids != nullptr, "model: target ids must not be null");
  for (std::int64_t i = 0; i < n; ++i)
    if ((ids[i] < 0 || ids[i] >= vocab_size) && ids[i] != backend::kIgnoreTarget)
      throw DataError(cat("model: target id ", ids[i], " at position ", i, " of the micro-batch is outside [0, ",
                          vocab_size, ") and is not ", backend::kIgnoreTarget,
                          " (ignored); check that the data was tokenized for this vocabulary"));
}

std::int64_t vocab_rows_per_rank(std::int64_t padded_vocab, int tp) { return (padded_vocab + tp - 1) / tp; }

std::vector<std::int32_t> local_token_rows(const std::int32_t* tokens, std::int64_t n, std::int64_t lo, std::int64_t Vs) {
  std::vector<std::int32_t> rows(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    rows[i] = static_cast<std::int32_t>(tokens[i] >= lo && tokens[i] < lo + Vs ? tokens[i] - lo : Vs);
  return rows;
}

void embed_tokens(const TpContext& ctx, Tensor out, Tensor partial, const std::int32_t* tokens, std::int64_t vocab_size,
                  Tensor ids, Tensor wte, Tensor wpe, Tensor positions) {
  const std::int64_t n = ids.numel();
  check_token_ids("token", tokens, n, vocab_size);
  if (ctx.size() == 1) {  // the plain lookup: the ids are the table's rows
    ctx.be.copy_from_host(ids.data, tokens, ids.bytes());
    ctx.be.embedding_forward(as_batch_rows(out, ids), ids, wte, wpe, positions);
    return;
  }
  const std::int64_t Vs = wte.dim(0) - 1;  // without the zero row
  const std::vector<std::int32_t> local = local_token_rows(tokens, n, ctx.rank() * Vs, Vs);
  ctx.be.copy_from_host(ids.data, local.data(), ids.bytes());
  const Tensor sum = ctx.sequence_parallel ? partial : out;
  ctx.be.embedding_forward(as_batch_rows(sum, ids), ids, wte, ctx.rank() == 0 ? wpe : Tensor{}, positions);
  if (ctx.sequence_parallel) reduce_scatter_rows(ctx, partial, out);
  else all_reduce_sum(ctx, out);
}

void embed_tokens_backward(const TpContext& ctx, Tensor dwte, Tensor dwpe, Tensor dout, Tensor dfull, Tensor ids,
                           Tensor positions) {
  if (ctx.sequence_parallel) gather_rows(ctx, dout, dfull);
  ctx.be.embedding_backward(dwte, dwpe, as_batch_rows(ctx.sequence_parallel ? dfull : dout, ids),
                            ids, positions);
  if (ctx.size() == 1) return;
  const std::int64_t Vs = dwte.dim(0) - 1, C = dwte.dim(1);
  // The zero row collected the tokens of other ranks' blocks: not a parameter's gradient.
  Tensor zero_row = dwte;
  zero_row.data = static_cast<char*>(dwte.data) + Vs * C * dtype_size(dwte.dtype);
  zero_row.rank = 1;
  zero_row.shape = {C, 0, 0, 0};
  ctx.be.fill_zero(zero_row);
}

namespace {

// The tokens' rows as table piece [first, first + count) reads them (kTokenInOtherRows outside it, and
// for `skip`), copied to ids.
void piece_rows(backend::Backend& be, const std::vector<std::int32_t>& rows, Tensor ids, std::int64_t first,
                std::int64_t count, std::int64_t skip) {
  ZT_CHECK_EQ(static_cast<std::int64_t>(rows.size()), ids.numel(), "embedding piece: token rows");
  std::vector<std::int32_t> mine(rows.size());
  for (std::size_t n = 0; n < rows.size(); ++n) {
    const std::int64_t r = rows[n];
    mine[n] = r >= first && r < first + count && r != skip ? static_cast<std::int32_t>(r - first) : backend::kTokenInOtherRows;
  }
  be.copy_from_host(ids.data, mine.data(), ids.bytes());
}

}  // namespace

void embed_piece(const TpContext& ctx, Tensor sum, const std::vector<std::int32_t>& rows, Tensor ids, std::int64_t first,
                 Tensor wte) {
  piece_rows(ctx.be, rows, ids, first, wte.dim(0), -1);
  ctx.be.embedding_forward(as_batch_rows(sum, ids), ids, wte, Tensor());
}

void embed_pieces_done(const TpContext& ctx, Tensor out, Tensor partial) {
  if (ctx.size() == 1) return;
  if (ctx.sequence_parallel) reduce_scatter_rows(ctx, partial, out);
  else all_reduce_sum(ctx, out);
}

void embed_piece_backward(const TpContext& ctx, Tensor dwte, Tensor dout_all, const std::vector<std::int32_t>& rows,
                          Tensor ids, std::int64_t first, std::int64_t zero_row) {
  piece_rows(ctx.be, rows, ids, first, dwte.dim(0), zero_row);
  ctx.be.embedding_backward(dwte, Tensor(), as_batch_rows(dout_all, ids), ids);
}

std::vector<float> host_logits(const TpContext& ctx, Tensor logits, std::int64_t vocab) {
  const std::int64_t Vs = logits.dim(-1), N = logits.numel() / Vs;
  std::vector<float> mine(static_cast<std::size_t>(N * Vs)), out(static_cast<std::size_t>(N * vocab));
  backend::copy_to_host_as_f32(ctx.be, mine.data(), logits);
  if (ctx.size() == 1) {  // drop the padded columns
    for (std::int64_t n = 0; n < N; ++n) std::copy_n(mine.begin() + n * Vs, vocab, out.begin() + n * vocab);
    return out;
  }
  std::vector<float> all(mine.size() * ctx.size());
  all_gather_host(ctx, mine, all);
  for (std::int64_t n = 0; n < N; ++n)  // rank q's block [N, Vs] holds ids q*Vs ...
    for (std::int64_t v = 0; v < vocab; ++v) out[n * vocab + v] = all[(v / Vs) * N * Vs + n * Vs + v % Vs];
  return out;
}

}  // namespace zt::layers
