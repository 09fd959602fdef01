// Llama's block as Hugging Face LlamaForCausalLM computes it, and its relatives on the same block (Mistral;
// Qwen2 with q, k, v biases; Qwen3 with an RMSNorm over each q and k head before RoPE and a head width of
// its own): pre-RMSNorm attention with rotate-half RoPE on q and k, K/V heads shared by NH/NKV query
// heads, down(silu(gate(x)) * up(x)); nn.Linear weights [out, in]; no dropout. On the
// tensor-parallel layers, Megatron's split (tp_split.hpp): each rank holds n_head/tp query heads with
// their n_kv_head/tp K/V heads and F/tp SwiGLU units; q|k|v and gate|up are column-parallel GEMMs over
// adjacent weights, o and down row-parallel. tp = 1 is the plain block.
// The decoder (decoder.hpp) gives it the ends: embed_tokens, the final RMSNorm and the (tied or untied) head.
#pragma once

#include <vector>

#include "model/decoder.hpp"
#include "model/family.hpp"

namespace zt::model {

class LlamaBlock final : public Block {
 public:
  explicit LlamaBlock(const Geometry& g);
  void carve(backend::Carver& c) override;
  void bind(DecoderEnv& e) override;
  void forward(DecoderEnv& e, int l, const backend::Tensor& x, const backend::Tensor& w) override;
  void backward(DecoderEnv& e, int l, const backend::Tensor& x, const backend::Tensor& w,
                const backend::Tensor& g) override;
  void recompute_selective(DecoderEnv& e, int l) override;
  backend::Tensor output(int l) const override { return saved_[index(l)].res3; }

 private:
  struct Saved {  // per block (qkv after RoPE; gu = gate | up); widths divided by tp where split
    backend::Tensor ln1, qkv, atty, lse, res2, ln2, gu, act, res3;
    layers::NormStats ln1_stats, ln2_stats;
    backend::Tensor qkv_pre, q_rstd, k_rstd;  // Qwen3: q|k|v before its head norms; their statistics
  };
  backend::Tensor qkv_bias(DecoderEnv& e, const backend::Tensor& unit, int u) const;  // Qwen2's, or empty
  backend::Tensor d_attention(DecoderEnv& e) const;  // d(attention output): its own, or inside dln
  // Qwen3's q_norm and k_norm: forward on the projection's output (into qkv), and backward in place on
  // d(qkv) (their weights' gradients summed over the TP group, whose ranks hold some heads each).
  void qk_norm_forward(DecoderEnv& e, Saved& s, const backend::Tensor& w, int u);
  void qk_norm_backward(DecoderEnv& e, Saved& s, const backend::Tensor& dqkv, const backend::Tensor& w,
                        const backend::Tensor& g, int u);

  std::int64_t heads_, kv_heads_, qkv_width_, attn_width_, ffn_;  // this rank's
  std::vector<Saved> saved_;
  backend::Tensor inv_freq_;         // [hs/2] f32, RoPE's frequencies
  backend::Tensor dbig_, dact_;      // gradient scratch: [B,T,max(W,2F)/tp], [B,T,F/tp]
  backend::Tensor datty_;            // [B,T,A/tp] when it does not fit in dln (A = NH hs > C)
  backend::Tensor dqk_norm_;         // [2 hs] f32 (qk_norm): q_norm | k_norm's partial or dropped gradients
};

// Llama's family: LlamaForCausalLM's parameters and config.json (Qwen2ForCausalLM's with q, k, v biases;
// MistralForCausalLM directories load as Llama), its split and its LoRA modules.
const Family& llama_family();

}  // namespace zt::model
