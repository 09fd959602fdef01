// The decoder's vocabulary units in pieces (zero.split_vocab, decoder.hpp's vocab_unit_pieces): a ZeRO
// engine gathers and reduces an untied model's token embedding and LM head chunk by chunk, and the
// decoder's lookup, loss and their backward take them so: the embedding piece by piece (its rows found
// from the pieces' sizes), the head by the loss's chunks (PiecedHead), the final norm as its own piece.
#include "core/error.hpp"
#include "model/decoder.hpp"
#include "model/tp_split.hpp"

namespace zt::model {

using backend::Tensor;

std::vector<UnitPieces> vocab_unit_pieces(const ParamTable& table, int tp, int tp_rank, std::int64_t loss_chunk) {
  const GptShape& s = table.shape();
  const int last = s.n_layer + 1;
  if (s.tie_embeddings || last >= table.n_units()) return {};
  const std::int64_t rows = tp == 1 ? s.padded_vocab : vocab_shard_rows(s, tp);
  const std::int64_t chunk = layers::loss_chunk_columns(rows, loss_chunk);
  const std::int64_t n = layers::loss_chunks(rows, std::int64_t{tp_rank} * rows, s.vocab_size, chunk);
  if (n <= 1) return {};
  const std::size_t row = static_cast<std::size_t>(s.n_embd);
  // Unit u's table (a [>= rows, C] matrix from `table_offset` on) in n pieces of `chunk` rows, the last to
  // the unit's end, after a first piece of what precedes the table in the unit (the final norm), if any.
  auto split = [&](int u, const ParamInfo& t) {
    ZT_CHECK(t.shape.size() == 2 && t.shape[0] >= rows && t.shape[1] == s.n_embd, "vocab_unit_pieces: ", t.name,
             " is not a table of ", rows, " rows");
    const Unit& unit = table.units()[static_cast<std::size_t>(u)];
    UnitPieces p{u, {}};
    if (t.offset > unit.offset) p.pieces.push_back({unit.offset, t.offset - unit.offset});
    for (std::int64_t k = 0; k < n; ++k) {
      const std::size_t first = t.offset + static_cast<std::size_t>(k * chunk) * row;
      p.pieces.push_back({first, (k + 1 < n ? first + static_cast<std::size_t>(chunk) * row : unit.offset + unit.numel) - first});
    }
    return p;
  };
  std::vector<UnitPieces> out;
  if (table.end_param(0) - table.first_param(0) == 1) out.push_back(split(0, table.params()[table.first_param(0)]));
  if (!s.value_head && table.end_param(last) > table.first_param(last))  // a value head's [1, C] stays whole
    out.push_back(split(last, table.params()[table.end_param(last) - 1]));
  return out;
}

namespace {

// The head's rows by chunk from a source that hands unit L+1 out in pieces (vocab_unit_pieces): chunk k
// is piece 1 + k, its first rows.
class PiecedHead final : public layers::HeadRows {
 public:
  PiecedHead(ParamSource& params, GradSink* grads, int unit, std::int64_t C)
      : params_(params), grads_(grads), unit_(unit), C_(C) {}
  Tensor weight(std::int64_t k, std::int64_t, std::int64_t width) override {
    return rows(params_.piece(unit_, piece(k)), width);
  }
  void release(std::int64_t k) override { params_.release_piece(unit_, piece(k)); }
  Tensor grad(std::int64_t k, std::int64_t, std::int64_t width) override {
    return grads_ ? rows(grads_->piece(unit_, piece(k)), width) : Tensor();
  }
  void grad_done(std::int64_t k) override {
    if (grads_) grads_->piece_done(unit_, piece(k));
  }

 private:
  static int piece(std::int64_t k) { return static_cast<int>(k) + 1; }
  Tensor rows(const Tensor& piece, std::int64_t width) const {
    if (piece.empty()) return piece;  // a frozen head
    ZT_CHECK(piece.numel() >= width * C_, "model: a head piece of ", piece.numel(), " elements for ", width, " rows");
    return Tensor(piece.data, piece.dtype, {width, C_});
  }
  ParamSource& params_;
  GradSink* grads_;
  int unit_;
  std::int64_t C_;
};

}  // namespace

std::int64_t Decoder::loss_chunks() const {
  const std::int64_t lo = g_.tp > 1 ? env_.ctx.rank() * g_.vocab_rows : 0;
  return layers::loss_chunks(g_.vocab_rows, lo, g_.s.vocab_size, g_.loss_chunk);
}

bool Decoder::head_in_pieces(const ParamSource& params) const {
  const int last = g_.s.n_layer + 1, pieces = params.pieces(last);
  if (pieces == 1 || g_.s.tie_embeddings || g_.value_head) return false;
  ZT_CHECK_EQ(pieces, 1 + loss_chunks(), "model: the LM head's unit comes in ", pieces, " pieces, not the final norm and ",
              "the ", loss_chunks(), " loss chunks of ", g_.loss_chunk, " rows (vocab_unit_pieces)");
  return true;
}

Tensor Decoder::table_piece(const Tensor& piece) const {
  const std::int64_t C = g_.s.n_embd;
  ZT_CHECK(piece.numel() % C == 0, "model: an embedding piece of ", piece.numel(), " elements is not whole rows of ", C);
  return Tensor(piece.data, piece.dtype, {piece.numel() / C, C});
}

// The pieces hold the table's rows in order, whole rows each (vocab_unit_pieces); each token's row is in one.
void Decoder::embed_in_pieces(const std::int32_t* tokens, ParamSource& params) {
  layers::check_token_ids("token", tokens, g_.N, g_.s.vocab_size);
  ZT_CHECK(!positions_, "model: an embedding in pieces has no position table");
  const std::int64_t lo = g_.tp > 1 ? env_.ctx.rank() * g_.vocab_rows : 0;
  table_rows_ = g_.tp > 1 ? layers::local_token_rows(tokens, g_.N, lo, g_.vocab_rows)
                          : std::vector<std::int32_t>(tokens, tokens + g_.N);
  const Tensor sum = g_.sp ? env_.whole(t_.encoded) : t_.encoded;
  std::int64_t first = 0;  // the piece's first row
  for (int i = 0; i < params.pieces(0); ++i) {
    const Tensor rows = table_piece(params.piece(0, i));
    layers::embed_piece(env_.ctx, sum, table_rows_, t_.ids, first, rows);
    first += rows.dim(0);
    params.release_piece(0, i);
  }
  layers::embed_pieces_done(env_.ctx, t_.encoded, env_.whole(t_.encoded));
}

// Each piece's gradient final after its rows: reduced while the next is summed.
void Decoder::embedding_backward_in_pieces(int pieces, GradSink& grads) {
  if (g_.sp) layers::gather_rows(env_.ctx, env_.dres, env_.dfull);
  const Tensor dout = g_.sp ? env_.dfull : env_.dres;
  const std::int64_t zero_row = g_.tp > 1 ? g_.vocab_rows : -1;
  std::int64_t first = 0;  // the piece's first row
  for (int i = 0; i < pieces; ++i) {
    const Tensor g = grads.piece(0, i);
    if (!g.empty()) {
      const Tensor rows = table_piece(g);
      layers::embed_piece_backward(env_.ctx, rows, dout, table_rows_, t_.ids, first, zero_row);
      first += rows.dim(0);
    }
    grads.piece_done(0, i);
  }
}

// The norm's piece, then the head's rows chunk by chunk.
void Decoder::pieced_head_forward(ParamSource& params, const std::int32_t* targets) {
  const int last = g_.s.n_layer + 1;
  const Tensor norm = params.piece(last, 0);
  env_.norm.forward(t_.lnf, t_.lnf_stats, block_->output(g_.end - 1), final_norm(norm, 0), final_norm(norm, 1));
  params.release_piece(last, 0);
  PiecedHead head(params, nullptr, last, g_.s.n_embd);
  loss_forward(head, targets);
}

// The head's rows chunk by chunk (each piece's gradient final after its chunk), then the norm's piece.
void Decoder::pieced_head_backward(ParamSource& params, GradSink& grads, float dloss) {
  const int last = g_.s.n_layer + 1;
  PiecedHead head(params, &grads, last, g_.s.n_embd);
  loss_backward(head, dloss);
  const Tensor w = params.piece(last, 0);
  const Tensor g = grads.piece(last, 0);
  env_.norm.backward(env_.dres, final_norm(g, 0), final_norm(g, 1), env_.dln, block_->output(g_.end - 1),
                     final_norm(w, 0), t_.lnf_stats);
  params.release_piece(last, 0);
  grads.piece_done(last, 0);
}

}  // namespace zt::model
