// The network's vocabulary ends: the token embedding and the LM head's cross-entropy, Megatron's
// vocabulary-parallel layers. TP rank r holds rows [lo, lo + Vs) of the token table (lo = r*Vs,
// Vs = ceil(Vp/tp): the last shard's rows past Vp are padding), and, for the tied or untied LM head, the
// logits of those vocabulary ids only, so no rank ever holds the [N, Vp] logits. At tp = 1 they are the
// plain lookup and the fused cross-entropy over [N, Vp] (linear.hpp's rule: tp = 1 is the plain layer).
//
// The embedding (tp > 1): each rank looks up the tokens in its block (a token outside it reads the
// table's extra zero row, below), and the group sums: every row has exactly one nonzero term, so the sum
// is exactly the one-rank lookup. The table is [Vs + 1, C]: rank r's rows, then one row that stays zero
// (its gradient is cleared after each backward), so the lookup needs no masking op. At tp = 1 the table
// is [Vp, C] with no zero row.
//
// The cross-entropy (tp > 1, per row n, V real ids): M = max over the group of each rank's max logit,
// S = the group's sum of exp(l - M), z = the target's logit from the rank holding it (0 elsewhere,
// summed): loss = M + log S - z, and dlogits_r = dloss * (exp(l - M - log S) - onehot) on each rank's
// columns. Two reductions of [N] and [2N] host values (Communicator::all_reduce_values) instead of
// [N, Vp] logits: each rank's slice statistics and its gradient are the backend's
// (cross_entropy_slice_*, on the device), and only those row values visit the host.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "backend/carver.hpp"
#include "layers/linear.hpp"

namespace zt::layers {

// Throws DataError naming the first id outside [0, vocab_size) and its position ("token" or "target").
void check_token_ids(const char* what, const std::int32_t* ids, std::int64_t n, std::int64_t vocab_size);
// The same for targets, which may also be backend::kIgnoreTarget (outside the loss mask).
void check_target_ids(const std::int32_t* ids, std::int64_t n, std::int64_t vocab_size);

// The vocabulary rows a rank's table holds for a padded vocabulary of Vp rows: ceil(Vp / tp) (the
// zero row not counted).
std::int64_t vocab_rows_per_rank(std::int64_t padded_vocab, int tp);

// tokens (host, n) as this rank's table reads them: id - lo inside [lo, lo + Vs), else Vs (the zero row).
std::vector<std::int32_t> local_token_rows(const std::int32_t* tokens, std::int64_t n, std::int64_t lo, std::int64_t Vs);

// out [N, C] (under SP: [N/tp, C], partial [N, C] the scratch summed then scattered; else out again) =
// wte[tokens] + wpe[t] (wpe: empty without a position table; added by TP rank 0 only). tokens: host ids
// [N], checked against vocab_size, copied as this rank's table rows into ids (device i32 [B, T]).
// wte: [Vp, C] at tp = 1, [Vs + 1, C] (with the zero row) under TP.
void embed_tokens(const TpContext& ctx, backend::Tensor out, backend::Tensor partial, const std::int32_t* tokens,
                  std::int64_t vocab_size, backend::Tensor ids, backend::Tensor wte, backend::Tensor wpe);
// dwte +=, dwpe += (empty without a position table). dout as out; under SP dfull [N, C] scratch for the
// gathered dout (empty otherwise). Under TP the zero row's gradient is cleared. Every rank gets the whole
// dwpe: the position table is replicated, so each rank's copy takes the same update.
void embed_tokens_backward(const TpContext& ctx, backend::Tensor dwte, backend::Tensor dwpe, backend::Tensor dout,
                           backend::Tensor dfull, backend::Tensor ids);

// The whole logits [N, vocab] as fp32 on the host of every rank: this rank's [N, Vp] without the padded
// columns at tp = 1, else gathered from every rank's [N, Vs] block (for tests and sampling only).
std::vector<float> host_logits(const TpContext& ctx, backend::Tensor logits, std::int64_t vocab);

// Softmax cross-entropy over the vocabulary rows this rank's logits hold (all of them at tp = 1).
class VocabCrossEntropy {
 public:
  // Its device buffers for `rows` rows at this tp, carved with the model's activations.
  void carve(backend::Carver& c, std::int64_t rows, int tp);
  // logits [N, Vs]: vocabulary ids lo .. lo + Vs - 1 (those >= vocab are padding); targets (host, N),
  // backend::kIgnoreTarget where the loss mask leaves a row out (loss 0, no gradient). Returns the sum of
  // the row losses, added on the host in row order (the same on every rank of the group).
  double forward(const TpContext& ctx, backend::Tensor logits, const std::int32_t* targets, std::int64_t lo,
                 std::int64_t vocab);
  // dlogits [N, Vs] (may alias logits; padding columns 0) for the rows forward saw, times dloss.
  void backward(const TpContext& ctx, backend::Tensor dlogits, backend::Tensor logits, float dloss);

 private:
  double forward_whole(const TpContext& ctx, backend::Tensor logits, const std::int32_t* targets);
  double forward_sliced(const TpContext& ctx, backend::Tensor logits, const std::int32_t* targets, std::int64_t lo);
  backend::Tensor targets_;  // [N] i32: the targets (tp = 1), or the target's column in this slice
  backend::Tensor row_f32_;  // [N] f32: the losses (tp = 1), or the whole vocabulary's log-sum-exp
  backend::Tensor stats_;    // [N, 3] f32 (tp > 1): this slice's statistics (backend.hpp)
  std::int64_t rows_ = -1;   // N of the last forward
  int real_ = 0;             // columns of the logits that are real ids
};

}  // namespace zt::layers
