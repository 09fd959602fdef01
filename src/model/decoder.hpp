// The decoder every family shares (torchtitan's models/common/decoder, Megatron-Core's GPTModel): token
// embedding, a stack of pre-norm blocks, final norm, LM head and loss, on the tensor-parallel layers of
// src/layers (tp = 1 is their plain case, so this is the single-rank model too). Written once here: the
// stage's part of the model (pipeline stages), the activation arena, the forward and backward block loops
// with parameter units taken and released (ZeRO-3 gathers), gradient units handed off as they become
// final, LoRA's per-block hooks, recomputation and the stage boundary tensors. A family (family.hpp)
// writes its Block: the saved activations and forward/backward of its blocks; and says, as data, its
// norm, its position table and where its head lives.
//
// Units (param_table.hpp): 0 = token embedding (+ position table), 1..L = blocks, L+1 = final norm (+ an
// untied LM head after the norm's parameters). Forward asks for unit 0, blocks, L+1, then unit 0 again
// for a tied head; backward for the head's unit, L+1, the blocks L..1, then unit 0 (ParamSource's order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "backend/carver.hpp"
#include "layers/chunked_lm_loss.hpp"
#include "layers/linear.hpp"
#include "layers/norm.hpp"
#include "layers/vocab_parallel.hpp"
#include "model/model.hpp"

namespace zt::model {

// The numbers every part of the decoder derives its buffers from, computable without a backend (the
// memory planner carves with a null base).
struct Geometry {
  GptShape s;
  int B = 0, tp = 1;
  std::int64_t T = 0, N = 0, R = 0;  // N = B*T rows; R = the rows of the residual stream a rank holds
  bool sp = false;                   // sequence parallel: R = N / tp
  bool generation = false;           // ModelOptions::generation: T = tokens_per_row, over a KV cache
  DType dtype = DType::kF32;
  Recompute recompute = Recompute::kNone;
  int first = 0, end = 0;            // this stage's blocks [first, end)
  bool embeds = false, has_head = false;
  bool value_head = false;           // GptShape::value_head: the head gives values, not a loss over the vocabulary
  std::int64_t vocab_rows = 0;       // the LM head's rows on this rank: Vp, or ceil(Vp / tp)
  std::int64_t loss_chunk = 0;       // the LM head's loss in chunks of this many rows (loss_chunk_columns)
  static Geometry of(const GptShape& shape, const ModelOptions& options, int tp);
  bool keeps_all() const { return recompute == Recompute::kNone; }
  bool full_recompute() const { return recompute == Recompute::kFull; }
};

// The vocabulary's units of an untied model in pieces, for a ZeRO engine that gathers and reduces them
// one at a time (zero.split_vocab): the head's unit (L+1) as the final norm's parameters, then the head's
// rows chunk by chunk as the loss takes them (train.loss_chunk's chunks over the rows holding ids), and
// the token embedding (unit 0, when it is the unit's only parameter) by the same rows; each unit's last
// piece runs to its end (padding rows, a vocabulary shard's zero row). A value head (PPO's critic) stays
// whole, its embedding split. `table` is the rank's (a TP shard's at tp > 1, TP rank tp_rank). Empty where
// there is nothing to split: a tied head, or one chunk. (decoder_vocab_pieces.cpp, with the decoder's
// passes over the pieces.)
std::vector<UnitPieces> vocab_unit_pieces(const ParamTable& table, int tp, int tp_rank, std::int64_t loss_chunk);

// A per-token i32 array of the micro-batch on the backend, [B,T], allocated on first use (so a run
// without it holds nothing more): the document mask's segment starts (data.document_mask, RL's packed
// rollouts), or the tokens' positions in their sequences (packed rollouts, whose positions restart).
class TokenIndex {
 public:
  // values: host [B*T]; nullptr: off (the ops' default: every position attends [0, t]; position t).
  void set(backend::Backend& be, const std::int32_t* values, int B, std::int64_t T);
  backend::Tensor tensor() const { return on_ ? view_ : backend::Tensor(); }  // empty when off
  std::size_t bytes() const { return buffer_.bytes(); }

 private:
  backend::Buffer buffer_;
  backend::Tensor view_;
  bool on_ = false;
};

// What a family's block code reads besides its weights: the backend and TP context, the table, the
// residual stream's norm and shared buffers, LoRA and the document mask. Owned by the decoder.
struct DecoderEnv {
  DecoderEnv(backend::Backend& be, const ParamTable& table, const Geometry& g, const ModelOptions& options,
             layers::NormKind norm);
  backend::Backend& be;
  layers::TpContext ctx;
  const ParamTable& table;
  const Geometry& g;
  layers::Norm norm;
  Lora* lora = nullptr;
  TokenIndex segments;               // set_segment_starts
  TokenIndex sequence_positions;     // set_positions
  // Generation's forward (forward_cached): the cache, and the batch's slots [B] and positions [B,T] on the
  // backend; null cache: training's causal attention over the micro-batch.
  const KvCache* cache = nullptr;
  backend::Tensor slots, positions;
  backend::Tensor proj, dres, dln;  // [R, C]: a projection's output; d(residual stream); a norm's dout
  backend::Tensor full, dfull;      // [N, C] under SP: the gathered rows (empty otherwise)

  // Parameter k of unit u inside the unit's flat view; its gradient (empty when the unit is frozen).
  backend::Tensor param(const backend::Tensor& unit, int u, int k) const;
  backend::Tensor grad(const backend::Tensor& grads, int u, int k) const;
  // A [rows, cols] view starting at parameter k (adjacent parameters read as one fused weight), or empty.
  backend::Tensor fused(const backend::Tensor& unit, int u, int k, std::int64_t rows, std::int64_t cols) const;
  // What a column-parallel layer reads of an input this rank holds: itself, or under SP `full`, where
  // gathered() first all-gathers it (backward: the inputs are gathered again, not kept).
  backend::Tensor whole(const backend::Tensor& mine) const { return g.sp ? full : mine; }
  backend::Tensor gathered(const backend::Tensor& mine);
  // The tokens' positions the position table and RoPE read: generation's, training's given ones
  // (set_positions), or empty (position t).
  backend::Tensor token_positions() const { return cache ? positions : sequence_positions.tensor(); }
  // RoPE on the first n_rot_heads heads of qkv at the tokens' positions, and its backward.
  void rope(const backend::Tensor& qkv, const backend::Tensor& inv_freq, int n_rot_heads) const;
  void rope_backward(const backend::Tensor& dqkv, const backend::Tensor& inv_freq, int n_rot_heads) const;
  // Block l's attention of qkv's heads into out: causal over the micro-batch (lse kept for backward,
  // the document mask applied), or in generation over the cache (which first stores qkv's k and v).
  void attention(int l, const backend::Tensor& out, const backend::Tensor& lse, const backend::Tensor& qkv,
                 int n_head) const;
  // The LoRA hooks of matmul m for the layers (none without adapters): a row-parallel layer's output
  // before its reduction, a column-parallel layer's input gradient before its reduction.
  layers::BeforeReduce lora_forward(BlockMatmul m, const backend::Tensor& x) const;
  layers::BeforeReduce lora_backward(BlockMatmul m, const backend::Tensor& x, const backend::Tensor& dy) const;
};

// A family's transformer blocks, all of a stage's: their saved activations (per block, or one working
// set where the recompute mode rebuilds them) and their forward and backward passes.
class Block {
 public:
  explicit Block(const Geometry& g) : g_(g) {}
  virtual ~Block() = default;
  // Carves the saved activations and the blocks' own scratch (a null-based carver only counts).
  virtual void carve(backend::Carver& c) = 0;
  // Once, after carving into the model's arena: fills what the blocks read but never write (RoPE's table).
  virtual void bind(DecoderEnv& /*e*/) {}
  // Block l (global index) on input x [R, C] with its unit's parameters w; writes output(l).
  virtual void forward(DecoderEnv& e, int l, const backend::Tensor& x, const backend::Tensor& w) = 0;
  // env.dres holds d(output(l)) on entry and d(x) on exit; parameter gradients += into g (empty: frozen).
  virtual void backward(DecoderEnv& e, int l, const backend::Tensor& x, const backend::Tensor& w,
                        const backend::Tensor& g) = 0;
  // Selective recomputation: what the block's backward reads and kSelective did not keep.
  virtual void recompute_selective(DecoderEnv& e, int l) = 0;
  virtual backend::Tensor output(int l) const = 0;

 protected:
  std::size_t index(int l) const { return static_cast<std::size_t>(l - g_.first); }
  const Geometry& g_;
};

// The decoder's own tensors in its arena (the blocks carve theirs after `encoded`; the LM head's loss
// holds its chunk buffers itself).
struct DecoderTensors {
  backend::Tensor ids, encoded;  // ids [B,T] i32: this rank's table rows of the tokens; encoded [R, C]
  backend::Tensor slots, positions;  // generation's [B] and [B,T] i32
  backend::Tensor lnf;           // the final norm's output [R, C]
  backend::Tensor values, dvalues, values_f32;  // a value head's [N, 1] outputs and their gradient (X), and as f32
  layers::NormStats lnf_stats;
  backend::Tensor proj, dres, dln, full, dfull;  // DecoderEnv's
  layers::NormScratch norm;
};

class Decoder final : public Model {
 public:
  Decoder(backend::Backend& backend, const ParamTable& table, const ModelOptions& options);
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  double forward(const std::int32_t* tokens, const std::int32_t* targets, ParamSource& params) override;
  void backward(ParamSource& params, GradSink& grads, float dloss) override;
  std::vector<float> forward_logits(const std::int32_t* tokens, ParamSource& params) override;
  std::vector<float> forward_row_logits(const std::int32_t* tokens, ParamSource& params, std::int64_t row) override;
  std::vector<float> forward_cached(const CachedBatch& batch, KvCache& cache, ParamSource& params) override;
  void set_segment_starts(const std::int32_t* starts) override { env_.segments.set(be_, starts, g_.B, g_.T); }
  void set_positions(const std::int32_t* positions) override;
  void set_loss_weights(const float* weights) override;
  const std::vector<float>& token_losses() const override { return token_losses_; }
  void set_entropy(bool on) override;
  const std::vector<float>& token_entropies() const override { return loss_.entropies(); }
  void set_logit_temperature(float t) override;
  void set_entropy_weights(const float* weights) override;
  const std::vector<float>& values() const override { return token_losses_; }
  void set_lora(Lora* lora) override;
  backend::Tensor stage_input() override { return t_.encoded; }
  backend::Tensor stage_output() override { return block_->output(g_.end - 1); }
  backend::Tensor stage_output_grad() override { return env_.dres; }
  backend::Tensor stage_input_grad() override { return env_.dres; }
  const ParamTable& table() const override { return table_; }
  int micro_batch() const override { return g_.B; }
  DType compute_dtype() const override { return g_.dtype; }
  std::size_t activation_bytes() const override {
    return arena_.bytes() + loss_.held_bytes() + env_.segments.bytes() + env_.sequence_positions.bytes() +
           loss_weights_.bytes() + entropy_weights_.bytes();
  }
  static std::size_t activation_bytes(const GptShape& shape, const ModelOptions& options, int tp);

 private:
  // Carves the ends', the stream's and the blocks' tensors: one function for the model and the planner
  // (a null-based carver only counts), so the plan is the allocation to the byte.
  static void carve(backend::Carver& c, const Geometry& g, layers::NormKind norm, Block& blocks, DecoderTensors& t);
  backend::Tensor block_input(int l) const { return l == g_.first ? t_.encoded : block_->output(l - 1); }
  // targets: the loss (its sum into loss_sum_); null: the logits (into host_logits_).
  void run_forward(const std::int32_t* tokens, const std::int32_t* targets, ParamSource& params, bool head = true);
  void embed(const std::int32_t* tokens, ParamSource& params);
  void head_forward(ParamSource& params, const std::int32_t* targets);
  void loss_forward(layers::HeadRows& head, const std::int32_t* targets);
  // The source hands the head's unit out in pieces (vocab_unit_pieces): checked to be the loss's chunks.
  bool head_in_pieces(const ParamSource& params) const;
  std::int64_t loss_chunks() const;  // the LM head's loss chunks on this rank
  // The token embedding from a source that hands unit 0 out in pieces (vocab_unit_pieces), and its gradient.
  void embed_in_pieces(const std::int32_t* tokens, ParamSource& params);
  void embedding_backward_in_pieces(int pieces, GradSink& grads);
  backend::Tensor table_piece(const backend::Tensor& piece) const;  // a piece of unit 0 as [rows, C]
  void pieced_head_forward(ParamSource& params, const std::int32_t* targets);
  void pieced_head_backward(ParamSource& params, GradSink& grads, float dloss);
  void loss_backward(layers::HeadRows& head, float dloss);  // d(lnf) into env.dln (summed over the TP group)
  void logits_forward(const backend::Tensor& head_weight);  // every row, or only logit_rows_
  void value_forward(const backend::Tensor& head_weight);   // a value head's [N] values to the host
  void value_backward(const backend::Tensor& head_weight, const backend::Tensor& head_grad, float dloss);
  // Rows `rows` of x [N, C] as one [rows, C] tensor: a view where they are consecutive, else copied into `packed`.
  backend::Tensor pick_rows(const backend::Tensor& x, const std::vector<std::int64_t>& rows, backend::Buffer& packed);
  void head_backward(ParamSource& params, GradSink& grads, float dloss);
  void blocks_backward(ParamSource& params, GradSink& grads);
  void recompute(int l, const backend::Tensor& w);
  int head_unit() const;                                 // unit 0 (tied) or L+1
  int head_param() const;                                // the head's index inside its unit
  backend::Tensor head(const backend::Tensor& unit) const;  // this rank's [vocab_rows, C] of the head
  // The final norm's weight/bias in unit L+1's flat view, or in its first piece (the norm's alone).
  backend::Tensor final_norm(const backend::Tensor& unit, int k) const;

  backend::Backend& be_;
  const ParamTable& table_;
  Geometry g_;
  layers::NormKind norm_kind_;
  bool positions_;  // a learned position table (GPT-2's wpe) after the token embedding in unit 0
  DecoderEnv env_;
  std::unique_ptr<Block> block_;
  backend::Buffer arena_;
  DecoderTensors t_;
  layers::ChunkedLmLoss loss_;
  layers::RowReduce row_reduce_;  // tp > 1: the loss's row statistics over the TP group
  double loss_sum_ = 0;
  std::vector<float> token_losses_;  // the latest forward's, per token (a value head: its values)
  backend::Buffer loss_weights_;     // set_loss_weights' [N] f32 on the backend; empty: none
  bool entropy_ = false;             // set_entropy: forwards compute the tokens' entropies
  float logit_scale_ = 1.0f;         // 1 / set_logit_temperature's t: the head's input is scaled by it
  backend::Buffer entropy_weights_;  // set_entropy_weights' [N] f32 on the backend; empty: none
  std::vector<float> host_logits_;
  backend::Buffer logits_buffer_;  // logits_forward's [rows, vocab_rows], kept between calls
  std::vector<std::int64_t> logit_rows_;  // the rows whose logits logits_forward computes; empty: every row
  std::vector<std::int32_t> table_rows_;  // an embedding in pieces: each token's row of the rank's table (host)
  bool ready_for_backward_ = false;
};

}  // namespace zt::model
