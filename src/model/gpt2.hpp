// GPT-2's block (Radford et al. 2019; Hugging Face GPT2LMHeadModel): pre-LayerNorm attention with
// biases, tanh GELU MLP of 4C, Conv1D weights [in, out]; no dropout. On the tensor-parallel layers,
// Megatron's split (tp_split.hpp): each rank computes n_head/tp heads and 4C/tp MLP units; q|k|v and
// c_fc are column-parallel, both c_proj row-parallel (bias added once). tp = 1 is the plain block.
// The decoder (decoder.hpp) gives it the ends: wte + wpe, the final LayerNorm and the head tied to wte.
#pragma once

#include <memory>
#include <vector>

#include "model/decoder.hpp"
#include "model/family.hpp"

namespace zt::model {

class Gpt2Block final : public Block {
 public:
  explicit Gpt2Block(const Geometry& g) : Block(g) {}
  void carve(backend::Carver& c) override;
  void forward(DecoderEnv& e, int l, const backend::Tensor& x, const backend::Tensor& w) override;
  void backward(DecoderEnv& e, int l, const backend::Tensor& x, const backend::Tensor& w,
                const backend::Tensor& g) override;
  void recompute_selective(DecoderEnv& e, int l) override;
  backend::Tensor output(int l) const override { return saved_[index(l)].res3; }

 private:
  // Saved for backward, per block; widths divided by tp where the layer is split. The residual stream
  // (x, res2, res3, ln*) is [R, C].
  struct Saved {
    backend::Tensor ln1, qkv, atty, lse, res2, ln2, fch, fch_gelu, res3;
    layers::NormStats ln1_stats, ln2_stats;
  };
  bool fuses_gelu_forward(const DecoderEnv& e) const;   // c_fc's GEMM applies the GELU
  bool fuses_gelu_backward(const DecoderEnv& e) const;  // c_proj's input-gradient GEMM applies gelu'
  std::vector<Saved> saved_;
  backend::Tensor dbig_;  // gradient scratch [B,T,4C/tp]: d(fc), then d(qkv)
};

// GPT-2's family: GPT2LMHeadModel's parameters and config.json, its split and its LoRA modules.
const Family& gpt2_family();

}  // namespace zt::model
