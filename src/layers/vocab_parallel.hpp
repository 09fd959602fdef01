// The network's vocabulary ends, Megatron's vocabulary-parallel layers: the token embedding and the
// logits on the host (the LM head's loss: chunked_lm_loss.hpp). TP rank r holds rows [lo, lo + Vs) of the
// token table (lo = r*Vs, Vs = ceil(Vp/tp): the last shard's rows past Vp are padding), and, for the tied or
// untied LM head, the logits of those vocabulary ids only. At tp = 1 they are the plain lookup and logits
// (linear.hpp's rule: tp = 1 is the plain layer).
//
// The embedding (tp > 1): each rank looks up the tokens in its block (a token outside it reads the
// table's extra zero row, below), and the group sums: every row has exactly one nonzero term, so the sum
// is exactly the one-rank lookup. The table is [Vs + 1, C]: rank r's rows, then one row that stays zero
// (its gradient is cleared after each backward), so the lookup needs no masking op. At tp = 1 the table
// is [Vp, C] with no zero row.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
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
// positions [B,T] on the backend, optional (generation): wpe's rows at those positions (backend.hpp).
void embed_tokens(const TpContext& ctx, backend::Tensor out, backend::Tensor partial, const std::int32_t* tokens,
                  std::int64_t vocab_size, backend::Tensor ids, backend::Tensor wte, backend::Tensor wpe,
                  backend::Tensor positions = backend::Tensor());
// dwte +=, dwpe += (empty without a position table). dout as out; under SP dfull [N, C] scratch for the
// gathered dout (empty otherwise). Under TP the zero row's gradient is cleared. Every rank gets the whole
// dwpe: the position table is replicated, so each rank's copy takes the same update. positions as
// embed_tokens' (the forward's).
void embed_tokens_backward(const TpContext& ctx, backend::Tensor dwte, backend::Tensor dwpe, backend::Tensor dout,
                           backend::Tensor dfull, backend::Tensor ids, backend::Tensor positions = backend::Tensor());

// The same with the rank's table in row pieces (ZeRO's split embedding, zero.split_vocab; no position
// table). rows (host, N): every token's row of the rank's table (the ids at tp = 1, local_token_rows
// under TP); ids: device scratch [B, T] i32. embed_piece writes the rows of the tokens that table rows
// [first, first + wte.dim(0)) hold into `sum` (out, or under SP partial [N, C]), leaving the others; every
// token's row is in one piece. After the last, embed_pieces_done sums over the TP group as embed_tokens.
void embed_piece(const TpContext& ctx, backend::Tensor sum, const std::vector<std::int32_t>& rows, backend::Tensor ids,
                 std::int64_t first, backend::Tensor wte);
void embed_pieces_done(const TpContext& ctx, backend::Tensor out, backend::Tensor partial);
// dwte (the piece's rows, f32) += the rows of dout_all ([N, C]: dout, or under SP the gathered dfull)
// whose tokens the piece holds; never the zero row (row `zero_row` of the table under TP; -1: none).
void embed_piece_backward(const TpContext& ctx, backend::Tensor dwte, backend::Tensor dout_all,
                          const std::vector<std::int32_t>& rows, backend::Tensor ids, std::int64_t first,
                          std::int64_t zero_row);

// The whole logits [N, vocab] as fp32 on the host of every rank: this rank's [N, Vp] without the padded
// columns at tp = 1, else gathered from every rank's [N, Vs] block (for tests and sampling only).
std::vector<float> host_logits(const TpContext& ctx, backend::Tensor logits, std::int64_t vocab);

}  // namespace zt::layers
