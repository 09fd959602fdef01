// Llama split over a tensor-parallel group, Megatron's layout (model/tp_split.hpp): each rank holds
// n_head/tp query heads with their n_kv_head/tp K/V heads (grouped-query attention stays within a
// rank), F/tp SwiGLU units, and its block of the vocabulary in the token embedding and the (tied or
// untied) LM head; RMSNorms and residuals are replicated. The model::Model interface over the rank's
// shard table (tp_local_table), as tp::Gpt2Tp; equal to one rank's model::Llama (tests/mpi). Sequence
// parallel as tp::Gpt2Tp: the residual stream and RMSNorms hold a block of the rows each.
// Compute dtype and recompute modes as tp::Gpt2Tp (activations and their collectives in the compute
// dtype, statistics and gradients f32; gradients bit-identical in every recompute mode).
// Pipeline stages as tp::Gpt2Tp (the boundary tensors are this rank's [R, C] of the residual stream).
// LoRA and a frozen base as tp::Gpt2Tp (Llama's fused q|k|v and gate|up: each module's adapter on this
// rank's heads and units).
#pragma once

#include <cstdint>
#include <vector>

#include "model/lm_head.hpp"
#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "model/model.hpp"
#include "tp/linear.hpp"
#include "tp/vocab_parallel.hpp"

namespace zt::tp {

class LlamaTp final : public model::Model {
 public:
  // local: tp_local_table(global, group.size()); rank group.rank() of the group. Both must outlive it.
  LlamaTp(backend::Backend& backend, dist::Communicator& group, const model::ParamTable& local, int micro_batch,
          bool sequence_parallel = false, model::Recompute recompute = model::Recompute::kNone,
          DType compute = DType::kF32, model::Stage stage = {});
  LlamaTp(const LlamaTp&) = delete;
  LlamaTp& operator=(const LlamaTp&) = delete;

  double forward(const std::int32_t* tokens, const std::int32_t* targets, model::ParamSource& params) override;
  void backward(model::ParamSource& params, model::GradSink& grads, float dloss) override;
  std::vector<float> forward_logits(const std::int32_t* tokens, model::ParamSource& params) override;
  backend::Tensor stage_input() override { return a_.encoded; }
  backend::Tensor stage_output() override { return a_.layers.back().res3; }
  backend::Tensor stage_output_grad() override { return a_.dres; }
  backend::Tensor stage_input_grad() override { return a_.dres; }
  const model::ParamTable& table() const override { return table_; }
  int micro_batch() const override { return B_; }
  DType compute_dtype() const override { return dtype_; }
  // data.document_mask: the same starts on every TP rank (all hold the whole sequence in attention).
  void set_segment_starts(const std::int32_t* starts) override { segments_.set(be_, starts, B_, s_.seq_len); }
  void set_lora(model::Lora* lora) override;  // as Gpt2Tp::set_lora
  std::size_t activation_bytes() const override { return arena_.bytes() + segments_.bytes(); }
  // The same for any shape and degree, allocating nothing (for the memory planner).
  static std::size_t activation_bytes(const model::GptShape& shape, int micro_batch, int tp, bool sequence_parallel,
                                      model::Recompute recompute = model::Recompute::kNone, DType compute = DType::kF32,
                                      model::Stage stage = {});

 private:
  struct Layer {  // saved for backward, per block; the residual stream as in gpt2_tp.hpp
    backend::Tensor ln1, ln1_rstd, qkv, atty, lse, res2, ln2, ln2_rstd, gu, act, res3;
  };
  struct Acts {
    backend::Tensor rows, inv_freq, encoded, lnf, lnf_rstd, logits;
    backend::Tensor proj, dres, dtmp, dln, datty, dbig, dact;
    backend::Tensor full, dfull;  // SP only: [B*T, C] scratch
    backend::Tensor dnorm;        // [C] f32: a norm's partial gradient under SP, or a frozen norm's (dropped)
    std::vector<Layer> layers;
  };
  void norm_backward(const backend::Tensor& dinp, const backend::Tensor& dweight, const backend::Tensor& dout,
                     const backend::Tensor& inp, const backend::Tensor& weight, const backend::Tensor& rstd);
  backend::Tensor btc(backend::Tensor rows_by_c) const;
  backend::Tensor input_of(const backend::Tensor& mine);  // a column-parallel layer's whole input, for backward
  static std::size_t layout(const model::GptShape& s, int B, int tp, bool sp, model::Recompute r, DType compute,
                            model::Stage stage, std::byte* base, Acts* acts);
  Layer& layer(int l) { return a_.layers[static_cast<std::size_t>(l - first_)]; }  // block l of the model
  const backend::Tensor& block_input(int l) const {  // the stage's input, or the previous block's output
    return l == first_ ? a_.encoded : a_.layers[static_cast<std::size_t>(l - 1 - first_)].res3;
  }
  void run_forward(const std::int32_t* tokens, model::ParamSource& params);
  void block_forward(int l, const backend::Tensor& w);
  void block_backward(int l, const backend::Tensor& w, const backend::Tensor& g);
  void recompute_block(int l, const backend::Tensor& w);  // what backward needs, per the Recompute mode
  void head_backward(model::ParamSource& params, model::GradSink& grads, float dloss);  // the last stage's part
  backend::Tensor param(const backend::Tensor& unit, int u, int k) const;
  backend::Tensor fused(const backend::Tensor& unit, int u, int k, std::int64_t rows) const;  // adjacent weights
  backend::Tensor qkv_bias(const backend::Tensor& unit, int u) const;  // empty without shape.qkv_bias
  // Gradient views, empty for a frozen unit (g empty: LoRA's base).
  backend::Tensor grad(const backend::Tensor& g, int u, int k) const;
  backend::Tensor fused_grad(const backend::Tensor& g, int u, int k, std::int64_t rows) const;
  // LoRA's hooks, as Gpt2Tp's.
  backend::Tensor vocab_rows(backend::Tensor table) const;  // a vocabulary table's Vs rows, without the zero row
  int head_unit() const { return s_.tie_embeddings ? 0 : s_.n_layer + 1; }
  backend::Tensor head(const backend::Tensor& unit) const;

  backend::Backend& be_;
  TpContext ctx_;
  const model::ParamTable& table_;
  model::GptShape s_;
  int B_, tp_, r_;
  model::SegmentStarts segments_;
  bool sp_;
  model::Recompute recompute_;
  DType dtype_;
  int first_, end_;      // this stage's blocks [first_, end_)
  bool embeds_, has_head_;  // it runs the embedding / the final norm, head and loss
  std::int64_t Vs_, heads_, kv_heads_, qkv_width_, ffn_;  // this rank's share of each
  backend::Buffer arena_;
  Acts a_;
  VocabParallelCrossEntropy ce_;
  model::Lora* lora_ = nullptr;  // LoRA adapters, or none
  bool ready_for_backward_ = false;
};

}  // namespace zt::tp
