// GPT-2's block on the tensor-parallel layers (gpt2.hpp), llm.c's train_gpt2.c structure.
#include "model/gpt2.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "layers/linear.hpp"

namespace zt::model {

using backend::Tensor;

namespace {
// Parameter order inside a block unit (param_table.cpp).
enum Gpt2BlockParam { kLn1W, kLn1B, kAttnW, kAttnB, kAttnProjW, kAttnProjB, kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB };
constexpr backend::WeightLayout kInOut = backend::WeightLayout::kInOut;  // HF Conv1D weights are [in, out]
}  // namespace

// Activations in the compute dtype, statistics in f32; what the recompute mode rebuilds in backward is
// one working set shared by every block. Under kFull each block keeps only its output res3.
void Gpt2Block::carve(backend::Carver& c) {
  const Geometry& g = g_;
  const std::int64_t B = g.B, T = g.T, C = g.s.n_embd, Cr = C / g.tp, R = g.R;
  const bool full = g.full_recompute(), selective = !g.keeps_all();
  const auto kind = layers::NormKind::kLayerNorm;
  Saved work;
  saved_.assign(static_cast<std::size_t>(g.end - g.first), Saved{});
  for (Saved& s : saved_) {
    s.ln1 = c.per_block(full, work.ln1, {R, C});
    s.ln1_stats = layers::Norm::carve_stats(c, kind, R, full, work.ln1_stats);
    s.qkv = c.per_block(full, work.qkv, {B, T, 3 * Cr});
    s.atty = c.per_block(selective, work.atty, {B, T, Cr});
    s.lse = c.per_block(full, work.lse, {B, g.s.n_head / g.tp, T}, true);
    s.res2 = c.per_block(full, work.res2, {R, C});
    s.ln2 = c.per_block(full, work.ln2, {R, C});
    s.ln2_stats = layers::Norm::carve_stats(c, kind, R, full, work.ln2_stats);
    s.fch = c.per_block(full, work.fch, {B, T, 4 * Cr});
    s.fch_gelu = c.per_block(selective, work.fch_gelu, {B, T, 4 * Cr});
    s.res3 = c.take({R, C});  // block outputs are always kept: the next block's input
  }
  dbig_ = c.take({B, T, 4 * Cr});
}

// ln1 = LN(x); qkv = ln1 Wqkv + b (column-parallel: this rank's heads); atty = attn(qkv);
// res2 = x + atty Wproj + b (row-parallel: summed over the group, bias once); ln2 = LN(res2);
// fch = ln2 Wfc + b; res3 = res2 + gelu(fch) Wfcproj + b. LoRA's adapters read the column-parallel
// layers' whole input and join the row-parallel ones' partial sums.
void Gpt2Block::forward(DecoderEnv& e, int l, const Tensor& x, const Tensor& w) {
  const int u = 1 + l;
  Saved& s = saved_[index(l)];
  e.norm.forward(s.ln1, s.ln1_stats, x, e.param(w, u, kLn1W), e.param(w, u, kLn1B));
  layers::column_parallel_forward(e.ctx, s.qkv, s.ln1, e.whole(s.ln1), e.param(w, u, kAttnW), e.param(w, u, kAttnB), kInOut);
  if (e.lora) e.lora->forward(BlockMatmul::kQkv, e.whole(s.ln1), s.qkv);
  e.attention(l, s.atty, s.lse, s.qkv, g_.s.n_head / g_.tp);
  layers::row_parallel_forward(e.ctx, e.proj, e.whole(e.proj), s.atty, e.param(w, u, kAttnProjW),
                               e.param(w, u, kAttnProjB), kInOut, e.lora_forward(BlockMatmul::kAttnOut, s.atty));
  e.norm.add_forward(s.res2, s.ln2, s.ln2_stats, x, e.proj, e.param(w, u, kLn2W), e.param(w, u, kLn2B));
  if (fuses_gelu_forward(e)) {
    layers::column_parallel_gelu_forward(e.ctx, s.fch_gelu, s.fch, s.ln2, e.whole(s.ln2), e.param(w, u, kFcW),
                                         e.param(w, u, kFcB), kInOut);
  } else {
    layers::column_parallel_forward(e.ctx, s.fch, s.ln2, e.whole(s.ln2), e.param(w, u, kFcW), e.param(w, u, kFcB),
                                    kInOut);
    if (e.lora) e.lora->forward(BlockMatmul::kMlpUp, e.whole(s.ln2), s.fch);
    e.be.gelu_forward(s.fch_gelu, s.fch);
  }
  layers::row_parallel_forward(e.ctx, e.proj, e.whole(e.proj), s.fch_gelu, e.param(w, u, kFcProjW),
                               e.param(w, u, kFcProjB), kInOut, e.lora_forward(BlockMatmul::kMlpDown, s.fch_gelu));
  e.be.add(s.res3, s.res2, e.proj);
}

// The column-parallel layers' input gradients are summed over the group. LoRA: a row-parallel layer's
// adapter reads the whole dout (gathered into dfull under SP) and adds to this rank's dinp; a
// column-parallel one's input gradient joins the layer's before the group's sum.
void Gpt2Block::backward(DecoderEnv& e, int l, const Tensor& x, const Tensor& w, const Tensor& g) {
  const int u = 1 + l;
  Saved& s = saved_[index(l)];
  const Tensor dfch = dbig_;
  const Tensor dqkv(dbig_.data, g_.dtype, {g_.B, g_.T, 3 * std::int64_t{g_.s.n_embd} / g_.tp});
  const Tensor dout = g_.sp ? e.dfull : e.dres;  // a row-parallel layer's whole dout, once it ran
  // d(attention output) [B,T,C/tp] lives in dln's [R, C] (it fits: R*C >= N*C/tp), free until the
  // q|k|v layer's backward writes dln.
  const Tensor datty(e.dln.data, g_.dtype, {g_.B, g_.T, std::int64_t{g_.s.n_embd} / g_.tp});
  const bool fused = fuses_gelu_backward(e);  // c_fc's bias gradient then comes with d(pre)
  if (fused) {
    layers::row_parallel_dgelu_backward(e.ctx, dfch, e.dfull, e.grad(g, u, kFcProjW), e.grad(g, u, kFcProjB),
                                        e.grad(g, u, kFcB), e.dres, s.fch_gelu, e.param(w, u, kFcProjW), s.fch, kInOut);
  } else {
    layers::row_parallel_backward(e.ctx, dfch, e.dfull, e.grad(g, u, kFcProjW), e.grad(g, u, kFcProjB), e.dres,
                                  s.fch_gelu, e.param(w, u, kFcProjW), kInOut);
    if (e.lora) e.lora->backward(BlockMatmul::kMlpDown, s.fch_gelu, dout, dfch);
    e.be.gelu_backward(dfch, s.fch, dfch);
  }
  const Tensor ln2 = e.gathered(s.ln2);
  layers::column_parallel_backward(e.ctx, e.dln, e.dfull, e.grad(g, u, kFcW), fused ? Tensor() : e.grad(g, u, kFcB),
                                   dfch, ln2, e.param(w, u, kFcW), kInOut,
                                   e.lora_backward(BlockMatmul::kMlpUp, ln2, dfch));
  e.norm.backward_accumulate(e.dres, e.grad(g, u, kLn2W), e.grad(g, u, kLn2B), e.dln, s.res2, e.param(w, u, kLn2W),
                             s.ln2_stats);
  layers::row_parallel_backward(e.ctx, datty, e.dfull, e.grad(g, u, kAttnProjW), e.grad(g, u, kAttnProjB), e.dres,
                                s.atty, e.param(w, u, kAttnProjW), kInOut);
  if (e.lora) e.lora->backward(BlockMatmul::kAttnOut, s.atty, dout, datty);
  e.be.attention_backward(dqkv, datty, s.qkv, s.atty, s.lse, g_.s.n_head / g_.tp, e.segments.tensor());
  const Tensor ln1 = e.gathered(s.ln1);
  layers::column_parallel_backward(e.ctx, e.dln, e.dfull, e.grad(g, u, kAttnW), e.grad(g, u, kAttnB), dqkv, ln1,
                                   e.param(w, u, kAttnW), kInOut, e.lora_backward(BlockMatmul::kQkv, ln1, dqkv));
  e.norm.backward_accumulate(e.dres, e.grad(g, u, kLn1W), e.grad(g, u, kLn1B), e.dln, x, e.param(w, u, kLn1W),
                             s.ln1_stats);
}

// The GELU runs inside c_fc's GEMM unless an adapter joins c_fc's output before it, or selective
// recomputation rebuilds the GELU alone in backward: the fused GEMM applies GELU to the fp32 sum (one
// rounding less on a GPU), so the kept and the rebuilt output would differ.
bool Gpt2Block::fuses_gelu_forward(const DecoderEnv& e) const {
  return g_.recompute != Recompute::kSelective && !(e.lora && e.lora->adapts(BlockMatmul::kMlpUp));
}

// c_proj's input gradient takes gelu' in its GEMM unless an adapter's input gradient joins it before gelu'.
bool Gpt2Block::fuses_gelu_backward(const DecoderEnv& e) const {
  return !(e.lora && e.lora->adapts(BlockMatmul::kMlpDown));
}

// Attention from the kept qkv (this rank's heads, no communication) and GELU of the kept pre-activation.
void Gpt2Block::recompute_selective(DecoderEnv& e, int l) {
  Saved& s = saved_[index(l)];
  e.attention(l, s.atty, s.lse, s.qkv, g_.s.n_head / g_.tp);
  e.be.gelu_forward(s.fch_gelu, s.fch);
}

namespace {

class Gpt2Family final : public Family {
 public:
  Gpt2Family()
      : Family(Arch::kGpt2, "gpt2", "GPT-2", layers::NormKind::kLayerNorm, /*positions=*/true,
               backend::WeightLayout::kInOut) {}

  GptShape shape_of(const config::ModelConfig& m) const override {
    return GptShape::make(static_cast<int>(m.n_layer), static_cast<int>(m.n_head), static_cast<int>(m.n_embd),
                          static_cast<int>(m.vocab_size), static_cast<int>(m.seq_len));
  }

  std::unique_ptr<Block> make_block(const Geometry& g) const override { return std::make_unique<Gpt2Block>(g); }

  // Flat order: unit 0 = wte, wpe; unit 1+i = block i in HF's per-block order (Gpt2BlockParam); unit L+1 = ln_f.
  std::vector<ParamInfo> params(const GptShape& s) const override {
    const std::int64_t C = s.n_embd;
    std::vector<ParamInfo> p{param_info("transformer.wte.weight", {s.padded_vocab, C}, 0, true, s.vocab_size),
                             param_info("transformer.wpe.weight", {s.seq_len, C}, 0, true)};
    for (int l = 0; l < s.n_layer; ++l) {
      const std::string h = block_prefix(l);
      auto add = [&](const char* name, std::vector<std::int64_t> shape, bool decay) {
        p.push_back(param_info(h + name, std::move(shape), 1 + l, decay));
      };
      add("ln_1.weight", {C}, false), add("ln_1.bias", {C}, false);
      add("attn.c_attn.weight", {C, 3 * C}, true), add("attn.c_attn.bias", {3 * C}, false);
      add("attn.c_proj.weight", {C, C}, true), add("attn.c_proj.bias", {C}, false);
      add("ln_2.weight", {C}, false), add("ln_2.bias", {C}, false);
      add("mlp.c_fc.weight", {C, 4 * C}, true), add("mlp.c_fc.bias", {4 * C}, false);
      add("mlp.c_proj.weight", {4 * C, C}, true), add("mlp.c_proj.bias", {C}, false);
    }
    p.push_back(param_info("transformer.ln_f.weight", {C}, s.n_layer + 1, false));
    p.push_back(param_info("transformer.ln_f.bias", {C}, s.n_layer + 1, false));
    return p;
  }

  // Conv1D weights [in, out]: c_attn and c_fc cut their outputs (dim 1; biases dim 0; c_attn as q | k | v),
  // the two c_proj their inputs (dim 0); c_proj biases are added once, after the row-parallel sum.
  TpSplit tp_split(const ParamInfo& p, const GptShape& s) const override {
    using K = TpSplit::Kind;
    const std::int64_t C = s.n_embd;
    if (p.name == "transformer.wte.weight") return TpSplit{K::kVocab, 0, {s.padded_vocab}};
    if (p.name.ends_with("attn.c_attn.weight")) return TpSplit{K::kColumn, 1, {C, C, C}};
    if (p.name.ends_with("attn.c_attn.bias")) return TpSplit{K::kColumn, 0, {C, C, C}};
    if (p.name.ends_with("mlp.c_fc.weight")) return TpSplit{K::kColumn, 1, {4 * C}};
    if (p.name.ends_with("mlp.c_fc.bias")) return TpSplit{K::kColumn, 0, {4 * C}};
    if (p.name.ends_with("attn.c_proj.weight")) return TpSplit{K::kRow, 0, {C}};
    if (p.name.ends_with("mlp.c_proj.weight")) return TpSplit{K::kRow, 0, {4 * C}};
    return {};
  }

  // PEFT matches c_proj on both attn.c_proj and mlp.c_proj: two modules of one name.
  std::vector<LoraModule> lora_modules(const GptShape& s) const override {
    const std::int64_t C = s.n_embd;
    return {{"c_attn", "attn.c_attn", BlockMatmul::kQkv, C, 3 * C, 0, 3 * C},
            {"c_proj", "attn.c_proj", BlockMatmul::kAttnOut, C, C, 0, C},
            {"c_fc", "mlp.c_fc", BlockMatmul::kMlpUp, C, 4 * C, 0, 4 * C},
            {"c_proj", "mlp.c_proj", BlockMatmul::kMlpDown, 4 * C, C, 0, C}};
  }

  std::string block_prefix(int l) const override { return cat("transformer.h.", l, "."); }

  // GPT-2's residual projections start at 0.02 / sqrt(2 L) (the paper's scaled init, llm.c's too).
  float init_std(const ParamInfo& p, const GptShape& s) const override {
    const bool residual = p.name.ends_with("attn.c_proj.weight") || p.name.ends_with("mlp.c_proj.weight");
    return residual ? 0.02f / std::sqrt(2.0f * static_cast<float>(s.n_layer)) : 0.02f;
  }

  std::string hf_config_json(const GptShape& s, const std::string& torch_dtype) const override {
    nlohmann::json c = {
        {"architectures", {hf_architecture(s, "GPT2", "GPT2LMHeadModel")}}, {"model_type", "gpt2"},  {"activation_function", "gelu_new"},
        {"n_layer", s.n_layer},                 {"n_head", s.n_head},    {"n_embd", s.n_embd},
        {"vocab_size", s.vocab_size},           {"n_positions", s.seq_len}, {"n_ctx", s.seq_len},
        {"n_inner", nullptr},                   {"layer_norm_epsilon", 1e-5}, {"initializer_range", 0.02},
        {"attn_pdrop", 0.0},                    {"embd_pdrop", 0.0},     {"resid_pdrop", 0.0},  // trained without
        {"scale_attn_weights", true},           {"tie_word_embeddings", true}, {"use_cache", true},
        {"torch_dtype", torch_dtype}};
    if (s.vocab_size > 50256) c["bos_token_id"] = c["eos_token_id"] = 50256;  // GPT-2's <|endoftext|>
    return c.dump(2) + "\n";
  }
};
}  // namespace

const Family& gpt2_family() {
  static const Gpt2Family family;
  return family;
}

}  // namespace zt::model
