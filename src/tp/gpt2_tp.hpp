// GPT-2 split over a tensor-parallel group, Megatron's layout (model/tp_split.hpp): each rank computes
// n_head/tp heads and 4C/tp MLP units of every block and the logits of its block of the vocabulary;
// LayerNorms, residuals and the position table are replicated. The same model::Model interface as
// model::Gpt2, over the rank's shard table (tp_local_table), so the trainer's seam (ParamSource,
// GradSink, ZeRO over the data-parallel group) is unchanged. Equal to one rank's Gpt2 (tests/mpi).
// Sequence parallel: the residual stream and the LayerNorms hold each rank's block of the B*T rows
// (linear.hpp); the norms' weight gradients, partial then, are summed over the group per micro-batch.
// Activations in the compute dtype (f32, bf16 or f16; statistics and parameter gradients f32, as
// model::Gpt2), and the group's collectives on them in that dtype (Megatron's choice; the MPI
// communicator sums 16-bit spans in fp32, rounded once). Recompute modes as model::Gpt2's, gradients
// bit-identical in every mode at the same tp.
// Pipeline stages (model::Stage, parallel.pp x parallel.tp): as model::Gpt2, a stage runs its blocks, the
// embedding on the first and the final norm, head and loss on the last; the stage boundary tensors
// (stage_input() ... stage_input_grad()) are what this TP rank holds of the residual stream: [B*T, C],
// or its [B*T/tp, C] rows under SP, so TP rank r of one stage talks to TP rank r of the next.
// LoRA (model/lora.hpp): the adapters on this rank's shard join each column-parallel layer's output and
// each row-parallel layer's partial sum, and their input gradients join the layers' before the group's
// reduction; a frozen base (empty gradient units) computes no weight gradient and no collective for one.
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

class Gpt2Tp final : public model::Model {
 public:
  // local: tp_local_table(global, group.size()); rank group.rank() of the group. Both must outlive it.
  // stage: a pipeline stage's blocks, local the TP cut of its rank's table (default: the whole model).
  Gpt2Tp(backend::Backend& backend, dist::Communicator& group, const model::ParamTable& local, int micro_batch,
         bool sequence_parallel = false, model::Recompute recompute = model::Recompute::kNone,
         DType compute = DType::kF32, model::Stage stage = {});
  Gpt2Tp(const Gpt2Tp&) = delete;
  Gpt2Tp& operator=(const Gpt2Tp&) = delete;

  double forward(const std::int32_t* tokens, const std::int32_t* targets, model::ParamSource& params) override;
  void backward(model::ParamSource& params, model::GradSink& grads, float dloss) override;
  // The whole [B, T, V] logits, gathered from the group (for tests and sampling only).
  std::vector<float> forward_logits(const std::int32_t* tokens, model::ParamSource& params) override;
  // The pipeline stage's boundary (model.hpp), this rank's rows of it ([R, C], R as in Layer below).
  backend::Tensor stage_input() override { return a_.encoded; }
  backend::Tensor stage_output() override { return a_.layers.back().res3; }
  backend::Tensor stage_output_grad() override { return a_.dres; }
  backend::Tensor stage_input_grad() override { return a_.dres; }
  const model::ParamTable& table() const override { return table_; }
  int micro_batch() const override { return B_; }
  DType compute_dtype() const override { return dtype_; }
  // data.document_mask: the same starts on every TP rank (all hold the whole sequence in attention).
  void set_segment_starts(const std::int32_t* starts) override { segments_.set(be_, starts, B_, s_.seq_len); }
  // The adapters of this rank's shard (Lora built with tp = the group's size, rank = this rank's).
  void set_lora(model::Lora* lora) override;
  std::size_t activation_bytes() const override { return arena_.bytes() + segments_.bytes(); }
  // The same for any shape and degree, allocating nothing (for the memory planner).
  static std::size_t activation_bytes(const model::GptShape& shape, int micro_batch, int tp, bool sequence_parallel,
                                      model::Recompute recompute = model::Recompute::kNone, DType compute = DType::kF32,
                                      model::Stage stage = {});

 private:
  // Saved for backward, per block; widths divided by tp where the layer is split. The residual stream
  // (x, res2, res3, ln*) is [R, C] with R = B*T, or B*T/tp under SP.
  struct Layer {
    backend::Tensor ln1, ln1_mean, ln1_rstd, qkv, atty, lse, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, res3;
  };
  struct Acts {
    backend::Tensor rows, encoded, lnf, lnf_mean, lnf_rstd, logits;  // logits [B,T,Vs]
    backend::Tensor proj, dres, dtmp, dln, datty, dbig;
    backend::Tensor full, dfull;  // SP only: [B*T, C] scratch (gathered inputs, sums)
    backend::Tensor dnorm;        // [2C] f32: a norm's partial gradients under SP, or a frozen norm's (dropped)
    std::vector<Layer> layers;
  };
  void norm_backward(const backend::Tensor& dinp, const backend::Tensor& dweight, const backend::Tensor& dbias,
                     const backend::Tensor& dout, const backend::Tensor& inp, const backend::Tensor& weight,
                     const backend::Tensor& mean, const backend::Tensor& rstd);
  backend::Tensor btc(backend::Tensor rows_by_c) const;  // [B*T, C] seen as [B, T, C]
  backend::Tensor input_of(const backend::Tensor& mine);  // a column-parallel layer's whole input, for backward
  // Carves every activation out of `base` (null: counts only); returns the bytes used.
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
  backend::Tensor param(const backend::Tensor& unit, int u, int k) const;
  backend::Tensor grad(const backend::Tensor& g, int u, int k) const;  // empty for a frozen unit (g empty)
  backend::Tensor head(const backend::Tensor& unit) const;  // wte's own Vs rows, without the zero row

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
  bool embeds_, heads_;  // it runs the embedding / the final norm, head and loss
  std::int64_t Vs_;  // vocabulary rows per rank
  backend::Buffer arena_;
  Acts a_;
  VocabParallelCrossEntropy ce_;
  bool ready_for_backward_ = false;
  model::Lora* lora_ = nullptr;  // LoRA adapters, or none
};

}  // namespace zt::tp
