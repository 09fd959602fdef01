// The seam between the model and whoever holds its parameters and gradients. The model asks for one
// unit at a time, in a fixed order, so ZeRO-3 can all-gather a unit just before use and free it after,
// and reduce a unit's gradients as soon as they are final.
#pragma once

#include "backend/tensor.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// Parameters by unit. Forward asks for unit 0, blocks 1..L, unit L+1, then unit 0 again (tied LM head);
// backward for unit 0 (LM head), L+1, L..1. Each unit(u) is followed by release(u) once the model is
// done with it; the view must stay valid until then.
class ParamSource {
 public:
  virtual ~ParamSource() = default;
  virtual backend::Tensor unit(int u) = 0;  // flat view [units()[u].numel] of unit u's parameters (compute dtype)
  virtual void release(int /*u*/) {}

  // A unit handed out in pieces, one at a time (ZeRO's split vocabulary units, zero.split_vocab: the
  // pieces are vocab_unit_pieces(), decoder.hpp): how many (1: whole), and piece i's flat view, followed
  // by release_piece(u, i). unit(u) may still give the whole unit (assembled: as many bytes as unsplit).
  virtual int pieces(int /*u*/) const { return 1; }
  virtual backend::Tensor piece(int u, int i);
  virtual void release_piece(int u, int i);
};

// Gradients by unit, accumulated into (+=): micro-batches of one step add into the same gradients.
// Backward visits unit 0 (LM head into wte), L+1, L..1, then unit 0 again (embeddings); unit_done(u) says
// unit u's gradients for this backward pass are final (unit 0 last).
class GradSink {
 public:
  virtual ~GradSink() = default;
  // Flat f32 view [units()[u].numel] of unit u's gradients; an empty tensor: the unit is frozen (LoRA's
  // base), the model computes no weight gradient for it.
  virtual backend::Tensor unit(int u) = 0;
  virtual void unit_done(int /*u*/) {}
  // One share of unit u's gradient is complete and more will follow into a fresh unit(u) (a tied LM
  // head's share of the embedding's gradient, before the embedding's own): a sink may reduce it now.
  virtual void unit_part_done(int /*u*/) {}
  // Piece i of a unit its ParamSource hands out in pieces (f32 [the piece's numel]; empty: frozen), and
  // that piece's gradient final for this pass.
  virtual backend::Tensor piece(int u, int i);
  virtual void piece_done(int u, int i);
};

// Both over one flat buffer of ParamTable::numel() floats (ZeRO-0, tests, sampling).
class FlatParams final : public ParamSource {
 public:
  FlatParams(const ParamTable& table, backend::Tensor flat);
  backend::Tensor unit(int u) override;

 private:
  const ParamTable& table_;
  backend::Tensor flat_;
};

class FlatGrads final : public GradSink {
 public:
  FlatGrads(const ParamTable& table, backend::Tensor flat);
  backend::Tensor unit(int u) override;

 private:
  const ParamTable& table_;
  backend::Tensor flat_;
};

// Unit u's slice [offset, offset + numel) of a flat buffer of table.numel() elements (any dtype).
backend::Tensor unit_view(const ParamTable& table, const backend::Tensor& flat, int u);

// Parameter p's tensor (with its internal shape) inside the flat view of the unit that holds it.
backend::Tensor param_view(const ParamTable& table, const backend::Tensor& unit_flat, std::size_t p);
// The same inside a piece of its unit that starts where the unit starts and holds the whole parameter.
backend::Tensor param_view_in_piece(const ParamTable& table, const backend::Tensor& piece, std::size_t p);

// Unit u of a source that hands it out in pieces, copied together into `whole` (allocated from `be`,
// `numel` elements of the pieces' dtype): each piece taken, copied after the one before and released, in
// order. For a pass that needs the unit at once (the head's logits).
backend::Tensor assemble_pieces(ParamSource& src, int u, backend::Backend& be, std::int64_t numel, DType dtype,
                                backend::Buffer& whole);

}  // namespace zt::model
