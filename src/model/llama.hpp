// Llama forward and backward for one micro-batch [B, T] on any backend, as Hugging Face LlamaForCausalLM
// computes it: pre-norm blocks of RMSNorm (fp32 statistics), attention with rotate-half RoPE on q and k
// and K/V heads shared by NH/NKV query heads, down(silu(gate(x)) * up(x)); final RMSNorm; an LM head
// (untied, or the token embedding) over Vp padded columns (loss over the first V); no biases, no dropout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "model/lm_head.hpp"
#include "model/model.hpp"

namespace zt::model {

// Recompute (model.hpp): kSelective recomputes the attention output and the SwiGLU output; kFull keeps
// only block outputs.
class Llama final : public Model {
 public:
  // stage: a pipeline stage's blocks (model.hpp), with table its stage_table (stage_split.hpp).
  Llama(backend::Backend& backend, const ParamTable& table, int micro_batch, Recompute recompute = Recompute::kNone,
       DType compute = DType::kF32, Stage stage = {});
  Llama(const Llama&) = delete;
  Llama& operator=(const Llama&) = delete;

  double forward(const std::int32_t* tokens, const std::int32_t* targets, ParamSource& params) override;
  void backward(ParamSource& params, GradSink& grads, float dloss) override;
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
  std::size_t activation_bytes() const override { return arena_.bytes() + ids_.bytes() + freq_.bytes() + segments_.bytes(); }
  static std::size_t activation_bytes(const GptShape& shape, int micro_batch, Recompute recompute = Recompute::kNone,
                                      DType compute = DType::kF32, Stage stage = {});

 private:
  struct Layer {  // saved for backward, per block (qkv after RoPE; gu = gate | up)
    backend::Tensor ln1, ln1_rstd, qkv, atty, lse, res2, ln2, ln2_rstd, gu, act, res3;
  };
  struct Acts {
    backend::Tensor tokens, targets;                       // [B,T] i32
    backend::Tensor encoded, lnf, lnf_rstd, logits, losses;  // logits [B,T,Vp] (dlogits in place)
    backend::Tensor proj;                                   // [B,T,C] forward scratch
    backend::Tensor dres, dln, dbig, dact;                  // gradient scratch: dbig [B,T,max(W,2F)], dact [B,T,F]
    backend::Tensor dnorm;  // [C] f32: a frozen model's RMSNorm weight gradients, written and dropped
    std::vector<Layer> layers;
  };
  static std::size_t layout(const GptShape& s, int B, Recompute r, DType compute, std::byte* base, Acts* acts,
                                Stage stage = {});

  void check_ids(const char* what, const std::int32_t* ids) const;
  void run_forward(const std::int32_t* tokens, ParamSource& params);
  void block_forward(int l, const backend::Tensor& unit);
  void block_backward(int l, const backend::Tensor& unit, const backend::Tensor& grads);
  void recompute_block(int l, const backend::Tensor& unit);
  backend::Tensor param(const backend::Tensor& unit, int u, int k) const;
  // The adjacent projections read as one [rows, C] weight (q|k|v, or gate|up) starting at parameter k.
  backend::Tensor fused(const backend::Tensor& unit, int u, int k, std::int64_t rows) const;
  // Qwen2's q|k|v bias as one [C + 2 NKV hs] vector (empty without shape.qkv_bias).
  backend::Tensor qkv_bias(const backend::Tensor& unit, int u) const;
  backend::Tensor head_weight(const backend::Tensor& unit) const;  // lm_head, or embed_tokens when tied
  // Weight gradients: none for a matmul of a frozen unit (an empty gradient view); a scratch for its
  // norms (the op always writes one).
  backend::Tensor grad(const backend::Tensor& unit_grads, int u, int k) const;
  backend::Tensor fused_grad(const backend::Tensor& unit_grads, int u, int k, std::int64_t rows) const;
  backend::Tensor head_grad(const backend::Tensor& unit_grads) const;
  backend::Tensor norm_grad(const backend::Tensor& unit_grads, int u, int k) const;

  backend::Backend& be_;
  const ParamTable& table_;
  GptShape s_;
  int B_;
  Recompute recompute_;
  DType dtype_;
  backend::Buffer arena_, ids_, freq_;
  backend::Tensor inv_freq_;  // [hs/2] f32
  Acts a_;
  SegmentStarts segments_;  // data.document_mask
  Stage stage_;
  int first_, end_;  // this stage's blocks [first_, end_)
  bool embeds_, heads_;  // it runs the embedding / the final norm, head and loss
  bool ready_for_backward_ = false;
  Lora* lora_ = nullptr;  // LoRA adapters (lora.hpp), or none
};

}  // namespace zt::model
