// Megatron's vocabulary-parallel embedding and cross-entropy: TP rank r holds rows [lo, lo + Vs) of the
// token table (lo = r*Vs, Vs = ceil(Vp/tp): the last shard's rows past Vp are padding), and, for the
// tied or untied LM head, the logits of those vocabulary ids only, so no rank ever holds the [N, Vp]
// logits.
//
// The embedding: each rank looks up the tokens in its block (a token outside it reads the table's extra
// zero row, below), and the group sums: every row has exactly one nonzero term, so the sum is exactly
// the one-rank lookup. The table is [Vs + 1, C]: rank r's rows, then one row that stays zero (its
// gradient is cleared after each backward), so the lookup needs no masking op.
//
// The cross-entropy (per row n, V real ids): M = max over the group of each rank's max logit, S = the
// group's sum of exp(l - M), z = the target's logit from the rank holding it (0 elsewhere, summed):
// loss = M + log S - z, and dlogits_r = dloss * (exp(l - M - log S) - onehot) on each rank's columns.
// Two reductions of [N] and [2N] host values (Communicator::all_reduce_values) instead of [N, Vp]
// logits: each rank's slice statistics and its gradient are the backend's (cross_entropy_slice_*, on the
// device), and only those row values visit the host.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "tp/linear.hpp"

namespace zt::tp {

// tokens (host, n) as this rank's table reads them: id - lo inside [lo, lo + Vs), else Vs (the zero row).
std::vector<std::int32_t> local_token_rows(const std::int32_t* tokens, std::int64_t n, std::int64_t lo, std::int64_t Vs);

// out [N, C] (under SP: [N/tp, C], partial [N, C] the scratch summed then scattered; else out again) =
// wte[tokens] + wpe[t] (wpe: empty for Llama; added by TP rank 0 only). rows: local_token_rows(...) on
// the device, i32 [N]. wte_ext [Vs + 1, C].
void vocab_parallel_embedding_forward(const TpContext& ctx, backend::Tensor out, backend::Tensor partial,
                                      backend::Tensor rows, backend::Tensor wte_ext, backend::Tensor wpe);
// The same from the host's token ids [N], checked against vocab_size: this rank's rows of them
// (local_token_rows, its block of wte_ext's Vs rows) are copied into rows first.
void vocab_parallel_embed_tokens(const TpContext& ctx, backend::Tensor out, backend::Tensor partial,
                                 const std::int32_t* tokens, std::int64_t vocab_size, backend::Tensor rows,
                                 backend::Tensor wte_ext, backend::Tensor wpe);
// dwte_ext +=, dwpe += (empty for Llama). dout as out; under SP dfull [N, C] scratch for the gathered
// dout (empty otherwise). The zero row's gradient is cleared. Every rank gets the whole dwpe: the
// position table is replicated, so each rank's copy takes the same update.
void vocab_parallel_embedding_backward(const TpContext& ctx, backend::Tensor dwte_ext, backend::Tensor dwpe,
                                       backend::Tensor dout, backend::Tensor dfull, backend::Tensor rows);

// The whole logits [N, vocab] on the host of every rank, gathered from each rank's [N, Vs] block
// (for tests and sampling only: the one place the full logits exist).
std::vector<float> gather_logits(const TpContext& ctx, backend::Tensor logits, std::int64_t vocab);

class VocabParallelCrossEntropy {
 public:
  // logits [N, Vs]: vocabulary ids lo.. lo + Vs - 1 (those >= vocab are padding); targets (host, N),
  // backend::kIgnoreTarget where the loss mask leaves a row out (loss 0, no gradient, as the one-rank
  // cross-entropy). Returns the per-row losses (the same on every rank of the group).
  std::vector<float> forward(const TpContext& ctx, backend::Tensor logits, const std::int32_t* targets, std::int64_t lo,
                             std::int64_t vocab);
  // dlogits [N, Vs] (may alias logits; padding columns 0) for the rows forward saw, times dloss.
  void backward(const TpContext& ctx, backend::Tensor dlogits, backend::Tensor logits, float dloss);

 private:
  void bind(backend::Backend& be, std::int64_t rows);  // the device views below, for `rows` rows
  backend::Buffer device_;    // holds the three views below
  backend::Tensor lse_;       // [N] f32: log-sum-exp over the whole vocabulary, from forward
  backend::Tensor targets_;   // [N] i32: the target's column in this slice, kTargetInOtherSlice or kIgnoreTarget
  backend::Tensor stats_;     // [N, 3] f32: this slice's statistics (backend.hpp)
  std::int64_t rows_ = -1;    // N of the last forward
  int real_ = 0;              // columns of this slice that are real ids
};

}  // namespace zt::tp
