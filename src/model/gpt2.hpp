// GPT-2 forward and backward for one micro-batch [B, T] on any backend: pre-LN blocks, final LayerNorm,
// LM head tied to wte over Vp padded columns (loss over the first V), no dropout, GELU tanh, LN eps 1e-5.
// Parameters come unit by unit from a ParamSource; gradients go unit by unit into a GradSink.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "model/lm_head.hpp"
#include "model/model.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// Recompute (model.hpp): kNone keeps about 16 C floats per token and block; kSelective recomputes the
// attention output and the GELU output (5 C of them).
class Gpt2 final : public Model {
 public:
  // Allocates every activation for micro-batches of `micro_batch` sequences of table.shape().seq_len.
  // compute: the dtype of activations and of the parameters the ParamSource hands out (f32, bf16 or
  // f16; backend.hpp's precision rules); gradients are f32 whatever it is. The table must outlive the model.
  // stage: a pipeline stage's blocks (model.hpp), with table its stage_table (stage_split.hpp).
  Gpt2(backend::Backend& backend, const ParamTable& table, int micro_batch, Recompute recompute = Recompute::kNone,
       DType compute = DType::kF32, Stage stage = {});
  Gpt2(const Gpt2&) = delete;
  Gpt2& operator=(const Gpt2&) = delete;

  // tokens, targets: host arrays [B*T] with ids in [0, vocab_size). Returns the SUM of the B*T token
  // losses (the caller divides by the global token count). Keeps what backward needs.
  double forward(const std::int32_t* tokens, const std::int32_t* targets, ParamSource& params) override;

  // Gradients of sum_i dloss * loss_i, accumulated (+=) into `grads`; dloss = 1 / global tokens for a mean
  // over the global batch. Needs the preceding forward() and the same parameters; runs once per forward.
  void backward(ParamSource& params, GradSink& grads, float dloss) override;

  // Logits [B, T, V] on the host (padded columns dropped), for tests and sampling; no loss, no backward.
  std::vector<float> forward_logits(const std::int32_t* tokens, ParamSource& params) override;
  void set_segment_starts(const std::int32_t* starts) override { segments_.set(be_, starts, B_, s_.seq_len); }

  void set_lora(Lora* lora) override { lora_ = lora; }
  backend::Tensor stage_input() override { return a_.encoded; }
  backend::Tensor stage_output() override { return a_.layers.back().res3; }
  backend::Tensor stage_output_grad() override { return a_.dres; }
  backend::Tensor stage_input_grad() override { return a_.dres; }
  const ParamTable& table() const override { return table_; }
  int micro_batch() const override { return B_; }
  DType compute_dtype() const override { return dtype_; }
  // Bytes this model holds on the backend (activations, their gradients, tokens), as allocated.
  std::size_t activation_bytes() const override { return arena_.bytes() + ids_.bytes() + segments_.bytes(); }
  // The same number for any shape, allocating nothing (for the memory planner).
  static std::size_t activation_bytes(const GptShape& shape, int micro_batch, Recompute recompute = Recompute::kNone,
                                      DType compute = DType::kF32, Stage stage = {});

 private:
  struct Layer {  // saved for backward, per block
    backend::Tensor ln1, ln1_mean, ln1_rstd, qkv, atty, lse, res2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu, res3;
  };
  struct Acts {
    backend::Tensor tokens, targets;                                 // [B,T] i32
    backend::Tensor encoded, lnf, lnf_mean, lnf_rstd, logits, losses;  // logits [B,T,Vp] (dlogits in place)
    backend::Tensor proj;                                             // [B,T,C] forward scratch
    backend::Tensor dres, dtmp, dln, dbig;                            // gradient scratch, dbig [B,T,4C]
    backend::Tensor dnorm_w, dnorm_b;  // [C] f32: a frozen model's LayerNorm gradients, written and dropped
    std::vector<Layer> layers;
  };
  // Carves every activation out of `base` (null: counts only); returns the bytes used.
  static std::size_t layout(const GptShape& s, int B, Recompute r, DType compute, std::byte* base, Acts* acts,
                                Stage stage = {});

  void check_ids(const char* what, const std::int32_t* ids) const;
  void run_forward(const std::int32_t* tokens, ParamSource& params);
  void block_forward(int l, const backend::Tensor& unit);
  void block_backward(int l, const backend::Tensor& unit, const backend::Tensor& grads);
  void recompute_block(int l, const backend::Tensor& unit);  // what backward needs, per the Recompute mode
  backend::Tensor param(const backend::Tensor& unit, int u, int k) const;  // k-th parameter of unit u
  // Gradients of a matmul's weight or bias (none when the unit is frozen: an empty gradient view), and of
  // a LayerNorm's weight or bias (a scratch when frozen: the op always writes one).
  backend::Tensor grad(const backend::Tensor& unit_grads, int u, int k) const;
  backend::Tensor norm_grad(const backend::Tensor& unit_grads, int u, int k, bool bias) const;

  backend::Backend& be_;
  const ParamTable& table_;
  GptShape s_;
  int B_;
  Recompute recompute_;
  DType dtype_;
  backend::Buffer arena_, ids_;
  Acts a_;
  SegmentStarts segments_;  // data.document_mask
  Stage stage_;
  int first_, end_;  // this stage's blocks [first_, end_)
  bool embeds_, heads_;  // it runs the embedding / the final norm, head and loss
  bool ready_for_backward_ = false;
  Lora* lora_ = nullptr;  // LoRA adapters (lora.hpp), or none
};

}  // namespace zt::model
