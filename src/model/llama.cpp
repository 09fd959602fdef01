// Llama's block on the tensor-parallel layers (llama.hpp): the q|k|v and gate|up projections are single
// GEMMs over adjacent weights (param_table.cpp's order; a TP rank's q_r|k_r|v_r and gate_r|up_r stay
// adjacent in its shard).
#include "model/llama.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "layers/linear.hpp"
#include "model/rope.hpp"

namespace zt::model {

using backend::Tensor;

namespace {
// Parameter order inside a block unit (the family's params below): kQBias.. only with qkv_bias (Qwen2),
// then q_norm and k_norm with qk_norm (Qwen3): at qk_norm_param().
enum LlamaBlockParam { kNorm1, kQ, kK, kV, kO, kNorm2, kGate, kUp, kDown, kQBias };
int qk_norm_param(const GptShape& s) { return kQBias + (s.qkv_bias ? 3 : 0); }
constexpr backend::WeightLayout kOutIn = backend::WeightLayout::kOutIn;  // HF nn.Linear weights are [out, in]
}  // namespace

LlamaBlock::LlamaBlock(const Geometry& g)
    : Block(g), heads_(g.s.n_head / g.tp), kv_heads_(g.s.n_kv_head / g.tp), qkv_width_(g.s.qkv_width() / g.tp),
      attn_width_(std::int64_t{g.s.n_head} * g.s.head_size() / g.tp), ffn_(g.s.ffn_hidden / g.tp) {}

// As the GPT-2 block's: activations in the compute dtype, statistics and RoPE's table in f32, what the
// recompute mode rebuilds shared by every block.
void LlamaBlock::carve(backend::Carver& c) {
  const Geometry& g = g_;
  const std::int64_t B = g.B, T = g.T, C = g.s.n_embd, R = g.R;
  const bool full = g.full_recompute(), selective = !g.keeps_all();
  const auto kind = layers::NormKind::kRmsNorm;
  inv_freq_ = c.stat({g.s.head_size() / 2});
  Saved work;
  saved_.assign(static_cast<std::size_t>(g.end - g.first), Saved{});
  for (Saved& s : saved_) {
    s.ln1 = c.per_block(full, work.ln1, {R, C});
    s.ln1_stats = layers::Norm::carve_stats(c, kind, R, full, work.ln1_stats);
    s.qkv = c.per_block(full, work.qkv, {B, T, qkv_width_});
    s.atty = c.per_block(selective, work.atty, {B, T, attn_width_});
    s.lse = c.per_block(full, work.lse, {B, heads_, T}, true);
    s.res2 = c.per_block(full, work.res2, {R, C});
    s.ln2 = c.per_block(full, work.ln2, {R, C});
    s.ln2_stats = layers::Norm::carve_stats(c, kind, R, full, work.ln2_stats);
    s.gu = c.per_block(full, work.gu, {B, T, 2 * ffn_});
    s.act = c.per_block(selective, work.act, {B, T, ffn_});
    s.res3 = c.take({R, C});  // block outputs are always kept: the next block's input
  }
  dbig_ = c.take({B, T, std::max(qkv_width_, 2 * ffn_)}), dact_ = c.take({B, T, ffn_});
  if (g.N * attn_width_ > R * C) datty_ = c.take({B, T, attn_width_});
  if (!g.s.qk_norm) return;
  Saved work_qk;
  for (Saved& s : saved_) {
    s.qkv_pre = c.per_block(full, work_qk.qkv_pre, {B, T, qkv_width_});
    s.q_rstd = c.per_block(full, work_qk.q_rstd, {g.N, heads_}, true);
    s.k_rstd = c.per_block(full, work_qk.k_rstd, {g.N, kv_heads_}, true);
  }
  dqk_norm_ = c.stat({2 * std::int64_t{g.s.head_size()}});
}

void LlamaBlock::bind(DecoderEnv& e) {
  const std::vector<float> inv = rope_inv_freq(g_.s.head_size(), g_.s.rope);
  e.be.copy_from_host(inv_freq_.data, inv.data(), inv_freq_.bytes());
}

Tensor LlamaBlock::qkv_bias(DecoderEnv& e, const Tensor& unit, int u) const {
  if (!g_.s.qkv_bias || unit.empty()) return Tensor();  // empty unit: a frozen one's gradients
  return Tensor(e.param(unit, u, kQBias).data, unit.dtype, {qkv_width_});  // q_r|k_r|v_r's biases, adjacent
}

// d(attention output) [B,T,A/tp]: in dln's [R, C] when it fits (free from the o layer's backward until
// the q|k|v layer's writes dln), else its own.
Tensor LlamaBlock::d_attention(DecoderEnv& e) const {
  return datty_.empty() ? Tensor(e.dln.data, g_.dtype, {g_.B, g_.T, attn_width_}) : datty_;
}

// ln1 = RMSNorm(x); qkv = RoPE(ln1 [Wq|Wk|Wv]^T (+ b)); atty = attn(qkv); res2 = x + atty Wo^T and
// ln2 = RMSNorm(res2) (one fused op); gu = ln2 [Wgate|Wup]^T; act = silu(gate) * up; res3 = res2 + act Wdown^T.
// LoRA's q|k|v adapters join before RoPE, as PEFT adapts q_proj's and k_proj's outputs.
void LlamaBlock::forward(DecoderEnv& e, int l, const Tensor& x, const Tensor& w) {
  const int u = 1 + l;
  const std::int64_t C = g_.s.n_embd;
  Saved& s = saved_[index(l)];
  e.norm.forward(s.ln1, s.ln1_stats, x, e.param(w, u, kNorm1), Tensor());
  const Tensor projected = g_.s.qk_norm ? s.qkv_pre : s.qkv;  // q|k|v as the projection (and LoRA) give it
  layers::column_parallel_forward(e.ctx, projected, s.ln1, e.whole(s.ln1), e.fused(w, u, kQ, qkv_width_, C),
                                  qkv_bias(e, w, u), kOutIn);
  if (e.lora) e.lora->forward(BlockMatmul::kQkv, e.whole(s.ln1), projected);
  if (g_.s.qk_norm) qk_norm_forward(e, s, w, u);
  e.rope(s.qkv, inv_freq_, static_cast<int>(heads_ + kv_heads_));  // q's heads, then k's
  e.attention(l, s.atty, s.lse, s.qkv, static_cast<int>(heads_));
  layers::row_parallel_forward(e.ctx, e.proj, e.whole(e.proj), s.atty, e.param(w, u, kO), Tensor(), kOutIn,
                               e.lora_forward(BlockMatmul::kAttnOut, s.atty));
  e.norm.add_forward(s.res2, s.ln2, s.ln2_stats, x, e.proj, e.param(w, u, kNorm2), Tensor());
  layers::column_parallel_forward(e.ctx, s.gu, s.ln2, e.whole(s.ln2), e.fused(w, u, kGate, 2 * ffn_, C), Tensor(),
                                  kOutIn);
  if (e.lora) e.lora->forward(BlockMatmul::kMlpUp, e.whole(s.ln2), s.gu);
  e.be.swiglu_forward(s.act, s.gu);
  layers::row_parallel_forward(e.ctx, e.proj, e.whole(e.proj), s.act, e.param(w, u, kDown), Tensor(), kOutIn,
                               e.lora_forward(BlockMatmul::kMlpDown, s.act));
  e.be.add(s.res3, s.res2, e.proj);
}

// LoRA as in the GPT-2 block (q|k|v's adapters take the gradient before RoPE, as they joined).
void LlamaBlock::backward(DecoderEnv& e, int l, const Tensor& x, const Tensor& w, const Tensor& g) {
  const int u = 1 + l;
  const std::int64_t C = g_.s.n_embd;
  Saved& s = saved_[index(l)];
  const Tensor dgu(dbig_.data, g_.dtype, {g_.B, g_.T, 2 * ffn_}), dqkv(dbig_.data, g_.dtype, {g_.B, g_.T, qkv_width_});
  const Tensor datty = d_attention(e);
  const Tensor dout = g_.sp ? e.dfull : e.dres;  // a row-parallel layer's whole dout, once it ran
  layers::row_parallel_backward(e.ctx, dact_, e.dfull, e.grad(g, u, kDown), Tensor(), e.dres, s.act,
                                e.param(w, u, kDown), kOutIn);
  if (e.lora) e.lora->backward(BlockMatmul::kMlpDown, s.act, dout, dact_);
  e.be.swiglu_backward(dgu, s.gu, dact_);
  const Tensor ln2 = e.gathered(s.ln2);
  layers::column_parallel_backward(e.ctx, e.dln, e.dfull, e.fused(g, u, kGate, 2 * ffn_, C), Tensor(), dgu, ln2,
                                   e.fused(w, u, kGate, 2 * ffn_, C), kOutIn,
                                   e.lora_backward(BlockMatmul::kMlpUp, ln2, dgu));
  e.norm.backward_accumulate(e.dres, e.grad(g, u, kNorm2), Tensor(), e.dln, s.res2, e.param(w, u, kNorm2), s.ln2_stats);
  layers::row_parallel_backward(e.ctx, datty, e.dfull, e.grad(g, u, kO), Tensor(), e.dres, s.atty, e.param(w, u, kO),
                                kOutIn);
  if (e.lora) e.lora->backward(BlockMatmul::kAttnOut, s.atty, dout, datty);
  e.be.attention_backward(dqkv, datty, s.qkv, s.atty, s.lse, static_cast<int>(heads_), e.segments.tensor());
  e.rope_backward(dqkv, inv_freq_, static_cast<int>(heads_ + kv_heads_));
  if (g_.s.qk_norm) qk_norm_backward(e, s, dqkv, w, g, u);
  const Tensor ln1 = e.gathered(s.ln1);
  layers::column_parallel_backward(e.ctx, e.dln, e.dfull, e.fused(g, u, kQ, qkv_width_, C), qkv_bias(e, g, u), dqkv,
                                   ln1, e.fused(w, u, kQ, qkv_width_, C), kOutIn,
                                   e.lora_backward(BlockMatmul::kQkv, ln1, dqkv));
  e.norm.backward_accumulate(e.dres, e.grad(g, u, kNorm1), Tensor(), e.dln, x, e.param(w, u, kNorm1), s.ln1_stats);
}

// qkv = the projection with each q and k head RMS-normalised (the v heads as projected).
void LlamaBlock::qk_norm_forward(DecoderEnv& e, Saved& s, const Tensor& w, int u) {
  const int k = qk_norm_param(g_.s);
  const float eps = static_cast<float>(g_.s.norm_eps);
  e.be.copy(s.qkv.data, s.qkv_pre.data, s.qkv.bytes());
  e.be.head_rmsnorm_forward(s.qkv, s.q_rstd, s.qkv_pre, e.param(w, u, k), 0, static_cast<int>(heads_), eps);
  e.be.head_rmsnorm_forward(s.qkv, s.k_rstd, s.qkv_pre, e.param(w, u, k + 1), static_cast<int>(heads_),
                            static_cast<int>(kv_heads_), eps);
}

// d(qkv) after RoPE's backward is d(the normalised q|k|v): in place, the q and k heads' become d(projection).
// Each TP rank holds some of the heads, so its q_norm and k_norm gradients are partial: summed over the
// group in the scratch first; a frozen base (LoRA) drops them.
void LlamaBlock::qk_norm_backward(DecoderEnv& e, Saved& s, const Tensor& dqkv, const Tensor& w, const Tensor& g,
                                  int u) {
  const int k = qk_norm_param(g_.s);
  const std::int64_t hs = g_.s.head_size();
  const Tensor dq = e.grad(g, u, k), dk = e.grad(g, u, k + 1);
  const bool direct = g_.tp == 1 && !dq.empty();
  const Tensor sq(dqk_norm_.data, DType::kF32, {hs}), sk(static_cast<float*>(dqk_norm_.data) + hs, DType::kF32, {hs});
  if (!direct) e.be.fill_zero(dqk_norm_);
  e.be.head_rmsnorm_backward(dqkv, direct ? dq : sq, dqkv, s.qkv_pre, e.param(w, u, k), s.q_rstd, 0,
                             static_cast<int>(heads_));
  e.be.head_rmsnorm_backward(dqkv, direct ? dk : sk, dqkv, s.qkv_pre, e.param(w, u, k + 1), s.k_rstd,
                             static_cast<int>(heads_), static_cast<int>(kv_heads_));
  if (direct || dq.empty()) return;
  layers::all_reduce_sum(e.ctx, dqk_norm_);
  e.be.accumulate(dq, sq);
  e.be.accumulate(dk, sk);
}

// Attention from the kept (rotated) qkv, SwiGLU from the kept gate|up.
void LlamaBlock::recompute_selective(DecoderEnv& e, int l) {
  Saved& s = saved_[index(l)];
  e.be.attention_forward(s.atty, s.lse, s.qkv, static_cast<int>(heads_), e.segments.tensor());
  e.be.swiglu_forward(s.act, s.gu);
}

namespace {

class LlamaFamily final : public Family {
 public:
  LlamaFamily()
      : Family(Arch::kLlama, "llama", "Llama", layers::NormKind::kRmsNorm, /*positions=*/false,
               backend::WeightLayout::kOutIn) {}

  GptShape shape_of(const config::ModelConfig& m) const override {
    const int L = static_cast<int>(m.n_layer), H = static_cast<int>(m.n_head), C = static_cast<int>(m.n_embd);
    const RopeParams rope{m.rope_theta, m.rope_scaling == config::RopeScaling::kLlama3, m.rope_factor,
                          m.rope_low_freq_factor, m.rope_high_freq_factor, m.rope_original_max_position};
    const int ffn = m.ffn_hidden > 0 ? static_cast<int>(m.ffn_hidden)
                                     : llama_ffn_hidden(C, m.ffn_multiplier, static_cast<int>(m.ffn_multiple_of));
    GptShape s = GptShape::make_llama(L, H, C, static_cast<int>(m.vocab_size), static_cast<int>(m.seq_len),
                                      m.n_kv_head > 0 ? static_cast<int>(m.n_kv_head) : H, ffn,
                                      m.tie_embeddings == config::TieEmbeddings::kTrue, m.norm_eps, rope);
    s.qkv_bias = m.qkv_bias;
    s.qk_norm = m.qk_norm;
    s.head_dim = static_cast<int>(m.head_dim);
    if (s.head_size() % 2 != 0)
      throw ConfigError(cat("model: head size ", s.head_size(), " must be even for RoPE (model.head_dim)"));
    return s;
  }

  std::unique_ptr<Block> make_block(const Geometry& g) const override { return std::make_unique<LlamaBlock>(g); }

  // Flat order: unit 0 = embed_tokens; unit 1+i = block i (LlamaBlockParam); unit L+1 = norm, then lm_head unless
  // tied. Inside a block q, k, v are adjacent (one [W, C] projection for the block) and so are gate, up
  // ([2F, C]); Qwen2's q, k, v biases come last in the block, adjacent too, then Qwen3's q_norm and k_norm
  // ([hs] each, replicated under TP), so the others keep their places.
  std::vector<ParamInfo> params(const GptShape& s) const override {
    const std::int64_t C = s.n_embd, A = std::int64_t{s.n_head} * s.head_size(),
                       KV = std::int64_t{s.n_kv_head} * s.head_size(), F = s.ffn_hidden;
    std::vector<ParamInfo> p{param_info("model.embed_tokens.weight", {s.padded_vocab, C}, 0, true, s.vocab_size)};
    for (int l = 0; l < s.n_layer; ++l) {
      const std::string h = block_prefix(l);
      auto add = [&](const char* name, std::vector<std::int64_t> shape, bool decay) {
        p.push_back(param_info(h + name, std::move(shape), 1 + l, decay));
      };
      add("input_layernorm.weight", {C}, false);
      add("self_attn.q_proj.weight", {A, C}, true), add("self_attn.k_proj.weight", {KV, C}, true);
      add("self_attn.v_proj.weight", {KV, C}, true), add("self_attn.o_proj.weight", {C, A}, true);
      add("post_attention_layernorm.weight", {C}, false);
      add("mlp.gate_proj.weight", {F, C}, true), add("mlp.up_proj.weight", {F, C}, true);
      add("mlp.down_proj.weight", {C, F}, true);
      if (s.qkv_bias) {
        add("self_attn.q_proj.bias", {A}, false), add("self_attn.k_proj.bias", {KV}, false);
        add("self_attn.v_proj.bias", {KV}, false);
      }
      if (s.qk_norm) add("self_attn.q_norm.weight", {s.head_size()}, false), add("self_attn.k_norm.weight", {s.head_size()}, false);
    }
    p.push_back(param_info("model.norm.weight", {C}, s.n_layer + 1, false));
    if (!s.tie_embeddings) p.push_back(param_info("lm_head.weight", {s.padded_vocab, C}, s.n_layer + 1, true, s.vocab_size));
    return p;
  }

  // nn.Linear weights [out, in]: q, k, v, gate and up cut their outputs (dim 0); each is its own parameter,
  // adjacent in the flat order, so rank r's q_r | k_r | v_r and gate_r | up_r stay adjacent as the block's
  // fused projections read them (Qwen2's q, k, v biases alike). o_proj and down_proj cut their inputs (dim 1).
  TpSplit tp_split(const ParamInfo& p, const GptShape& s) const override {
    using K = TpSplit::Kind;
    if (p.name == "model.embed_tokens.weight" || p.name == "lm_head.weight") return TpSplit{K::kVocab, 0, {s.padded_vocab}};
    for (const char* column : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "gate_proj.weight", "up_proj.weight",
                               "q_proj.bias", "k_proj.bias", "v_proj.bias"})
      if (p.name.ends_with(column)) return TpSplit{K::kColumn, 0, {p.shape[0]}};
    if (p.name.ends_with("o_proj.weight") || p.name.ends_with("down_proj.weight")) return TpSplit{K::kRow, 1, {p.shape[1]}};
    return {};
  }

  // q, k, v share the block's q|k|v GEMM and gate, up its gate|up GEMM: each adapts its columns of it.
  std::vector<LoraModule> lora_modules(const GptShape& s) const override {
    const std::int64_t C = s.n_embd, F = s.ffn_hidden, W = s.qkv_width(), A = std::int64_t{s.n_head} * s.head_size(),
                       KV = std::int64_t{s.n_kv_head} * s.head_size();
    return {{"q_proj", "self_attn.q_proj", BlockMatmul::kQkv, C, W, 0, A},
            {"k_proj", "self_attn.k_proj", BlockMatmul::kQkv, C, W, A, KV},
            {"v_proj", "self_attn.v_proj", BlockMatmul::kQkv, C, W, A + KV, KV},
            {"o_proj", "self_attn.o_proj", BlockMatmul::kAttnOut, A, C, 0, C},
            {"gate_proj", "mlp.gate_proj", BlockMatmul::kMlpUp, C, 2 * F, 0, F},
            {"up_proj", "mlp.up_proj", BlockMatmul::kMlpUp, C, 2 * F, F, F},
            {"down_proj", "mlp.down_proj", BlockMatmul::kMlpDown, F, C, 0, C}};
  }

  std::string block_prefix(int l) const override { return cat("model.layers.", l, "."); }

  // Qwen3's q_norm and k_norm: one head's width each, applied to every head a TP rank holds.
  std::int64_t head_replicated_floats(const GptShape& s) const override { return s.qk_norm ? 2 * s.head_size() : 0; }

  std::string describe(const GptShape& s) const override {
    if (s.qk_norm) return cat("Llama (q, k head norms", s.qkv_bias ? ", q, k, v biases" : "", ", head size ", s.head_size(),
                              ": Qwen3)");
    return s.qkv_bias ? "Llama (q, k, v biases: Qwen2)" : "Llama";
  }

  // LlamaForCausalLM's config.json (transformers' LlamaConfig fields), rope settings included; with q, k, v
  // biases Qwen2ForCausalLM's.
  std::string hf_config_json(const GptShape& s, const std::string& torch_dtype) const override {
    nlohmann::json c = {
        {"architectures", {hf_architecture(s, "Llama", "LlamaForCausalLM")}}, {"model_type", "llama"},     {"hidden_act", "silu"},
        {"hidden_size", s.n_embd},               {"intermediate_size", s.ffn_hidden},
        {"num_hidden_layers", s.n_layer},        {"num_attention_heads", s.n_head},
        {"num_key_value_heads", s.n_kv_head},    {"head_dim", s.head_size()},
        {"vocab_size", s.vocab_size},            {"max_position_embeddings", s.seq_len},
        {"rms_norm_eps", s.norm_eps},            {"rope_theta", s.rope.theta},  {"rope_scaling", nullptr},
        {"tie_word_embeddings", s.tie_embeddings}, {"attention_bias", false}, {"mlp_bias", false},
        {"attention_dropout", 0.0},              {"initializer_range", 0.02}, {"pretraining_tp", 1},
        {"use_cache", true},                     {"torch_dtype", torch_dtype}};
    if (s.qkv_bias) {  // Qwen2ForCausalLM: Qwen2Config's fields (no attention_bias: q, k, v always have biases)
      c["architectures"] = {hf_architecture(s, "Qwen2", "Qwen2ForCausalLM")}, c["model_type"] = "qwen2";
      for (const char* llama_only : {"attention_bias", "mlp_bias", "pretraining_tp"}) c.erase(llama_only);
      if (s.head_size() * s.n_head == s.n_embd) c.erase("head_dim");  // Qwen2Config reads it only when it differs
      c["use_sliding_window"] = false, c["sliding_window"] = nullptr, c["max_window_layers"] = s.n_layer;
    }
    if (s.qk_norm) {  // Qwen3ForCausalLM: Qwen3Config's fields (attention_bias: biases on q, k, v and o)
      if (s.qkv_bias)
        throw ConfigError("model.qk_norm with model.qkv_bias has no Hugging Face architecture for config.json "
                          "(Qwen3's attention_bias puts biases on q, k, v and o, which ztrain does not compute): a "
                          "model with both trains but cannot be exported");
      c["architectures"] = {hf_architecture(s, "Qwen3", "Qwen3ForCausalLM")}, c["model_type"] = "qwen3";
      for (const char* llama_only : {"mlp_bias", "pretraining_tp"}) c.erase(llama_only);
      c["use_sliding_window"] = false, c["sliding_window"] = nullptr, c["max_window_layers"] = s.n_layer;
    }
    if (s.rope.llama3)
      c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", s.rope.factor}, {"low_freq_factor", s.rope.low_freq_factor},
                           {"high_freq_factor", s.rope.high_freq_factor},
                           {"original_max_position_embeddings", s.rope.original_max_position}};
    return c.dump(2) + "\n";
  }
};
}  // namespace

const Family& llama_family() {
  static const LlamaFamily family;
  return family;
}

}  // namespace zt::model
