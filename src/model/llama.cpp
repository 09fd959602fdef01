// Llama forward and backward over the backend's ops, in the structure of gpt2.cpp: activations in one
// arena allocated at construction, parameters and gradients unit by unit (param_source.hpp). The q|k|v
// and gate|up projections are single GEMMs over adjacent weights (param_table.cpp's order).
#include "model/llama.hpp"

#include <algorithm>

#include "backend/host_convert.hpp"
#include "core/error.hpp"
#include "model/carver.hpp"
#include "model/lm_head.hpp"

namespace zt::model {

using backend::Tensor;
using backend::WeightLayout;

namespace {
// Parameter order inside a block unit and inside unit L+1 (param_table.cpp); unit 0 holds embed_tokens only.
enum BlockParam { kNorm1, kQ, kK, kV, kO, kNorm2, kGate, kUp, kDown, kQBias };  // kQBias..: with qkv_bias
enum FinalParam { kNormF, kHead };
constexpr WeightLayout kOutIn = WeightLayout::kOutIn;  // HF nn.Linear weights are [out, in]
}  // namespace

std::size_t Llama::layout(const GptShape& s, int B, Recompute r, DType compute, std::byte* base, Acts* acts,
                          Stage stage) {
  Acts scratch;
  Acts& a = acts ? *acts : scratch;
  Carver c{base, compute};
  const std::int64_t T = s.seq_len, C = s.n_embd, N = std::int64_t{B} * T, W = s.qkv_width(), F = s.ffn_hidden;
  a.encoded = c.take({B, T, C});
  Layer work;  // one working set shared by every block where the mode recomputes it
  const bool full = r == Recompute::kFull, selective = r != Recompute::kNone;
  a.layers.resize(stage.end(s.n_layer) - stage.first_block);  // this stage's blocks only
  for (Layer& l : a.layers) {
    l.ln1 = c.per_block(full, work.ln1, {B, T, C});
    l.ln1_rstd = c.per_block(full, work.ln1_rstd, {N}, true);
    l.qkv = c.per_block(full, work.qkv, {B, T, W});
    l.atty = c.per_block(selective, work.atty, {B, T, C});
    l.lse = c.per_block(full, work.lse, {B, s.n_head, T}, true);
    l.res2 = c.per_block(full, work.res2, {B, T, C});
    l.ln2 = c.per_block(full, work.ln2, {B, T, C});
    l.ln2_rstd = c.per_block(full, work.ln2_rstd, {N}, true);
    l.gu = c.per_block(full, work.gu, {B, T, 2 * F});
    l.act = c.per_block(selective, work.act, {B, T, F});
    l.res3 = c.take({B, T, C});  // block outputs are always kept: the next block's input
  }
  if (stage.has_head(s.n_layer)) {
    a.lnf = c.take({B, T, C}), a.lnf_rstd = c.stat({N});
    a.logits = c.take({B, T, s.padded_vocab}), a.losses = c.stat({N});
  }
  a.proj = c.take({B, T, C});
  a.dres = c.take({B, T, C}), a.dln = c.take({B, T, C});
  a.dnorm = c.stat({C});
  a.dbig = c.take({B, T, std::max(W, 2 * F)}), a.dact = c.take({B, T, F});
  return c.used;
}

std::size_t Llama::activation_bytes(const GptShape& shape, int micro_batch, Recompute recompute, DType compute,
                                 Stage stage) {
  return layout(shape, micro_batch, recompute, compute, nullptr, nullptr, stage) +
         2 * static_cast<std::size_t>(micro_batch) * shape.seq_len * sizeof(std::int32_t) +
         static_cast<std::size_t>(shape.head_size() / 2) * sizeof(float);
}

Llama::Llama(backend::Backend& backend, const ParamTable& table, int micro_batch, Recompute recompute, DType compute,
           Stage stage)
    : be_(backend), table_(table), s_(table.shape()), B_(micro_batch), recompute_(recompute), dtype_(compute),
      stage_(stage), first_(stage.first_block), end_(stage.end(s_.n_layer)), embeds_(stage.has_embedding()),
      heads_(stage.has_head(s_.n_layer)) {
  ZT_CHECK_GT(micro_batch, 0, "Llama: micro_batch must be positive");
  ZT_CHECK(s_.arch == Arch::kLlama, "Llama: the parameter table is not Llama's (use make_model)");
  ZT_CHECK(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
           "Llama: compute dtype must be f32, bf16 or f16, not ", dtype_name(compute));
  ZT_CHECK(first_ >= 0 && first_ < end_ && end_ <= s_.n_layer, "Llama: stage blocks [", first_, ", ", end_, ") outside the model's ", s_.n_layer);
  arena_ = be_.allocate(layout(s_, B_, recompute_, dtype_, nullptr, nullptr, stage_));
  layout(s_, B_, recompute_, dtype_, static_cast<std::byte*>(arena_.data()), &a_, stage_);
  ids_ = be_.allocate(2 * static_cast<std::size_t>(B_) * s_.seq_len * sizeof(std::int32_t));
  a_.tokens = ids_.view(DType::kI32, {B_, s_.seq_len});
  a_.targets = ids_.view(DType::kI32, {B_, s_.seq_len}, std::int64_t{B_} * s_.seq_len);
  const std::vector<float> inv = rope_inv_freq(s_.head_size(), s_.rope);
  freq_ = be_.allocate(inv.size() * sizeof(float));
  inv_freq_ = freq_.view(DType::kF32, {static_cast<std::int64_t>(inv.size())});
  be_.copy_from_host(freq_.data(), inv.data(), freq_.bytes());
}

Tensor Llama::param(const Tensor& unit, int u, int k) const {
  return param_view(table_, unit, table_.first_param(u) + k);
}

Tensor Llama::fused(const Tensor& unit, int u, int k, std::int64_t rows) const {
  return Tensor(param(unit, u, k).data, unit.dtype, {rows, s_.n_embd});
}

Tensor Llama::qkv_bias(const Tensor& unit, int u) const {
  if (!s_.qkv_bias || unit.empty()) return Tensor();  // empty unit: a frozen one's gradients
  return Tensor(param(unit, u, kQBias).data, unit.dtype, {s_.qkv_width()});
}

Tensor Llama::head_weight(const Tensor& unit) const {
  return s_.tie_embeddings ? param(unit, 0, 0) : param(unit, s_.n_layer + 1, kHead);
}

Tensor Llama::grad(const Tensor& g, int u, int k) const { return g.empty() ? Tensor() : param(g, u, k); }
Tensor Llama::fused_grad(const Tensor& g, int u, int k, std::int64_t rows) const {
  return g.empty() ? Tensor() : fused(g, u, k, rows);
}
Tensor Llama::head_grad(const Tensor& g) const { return g.empty() ? Tensor() : head_weight(g); }
Tensor Llama::norm_grad(const Tensor& g, int u, int k) const { return g.empty() ? a_.dnorm : param(g, u, k); }

void Llama::check_ids(const char* what, const std::int32_t* ids) const {
  check_token_ids(what, ids, std::int64_t{B_} * s_.seq_len, s_.vocab_size);
}

// x = block input; ln1 = RMSNorm(x); qkv = RoPE(ln1 [Wq|Wk|Wv]^T); atty = attn(qkv); res2 = x + atty Wo^T;
// ln2 = RMSNorm(res2) (one fused op with the add); gu = ln2 [Wgate|Wup]^T; act = silu(gate) * up;
// res3 = res2 + act Wdown^T.
void Llama::block_forward(int l, const Tensor& w) {
  const int u = 1 + l;
  Layer& L = a_.layers[l - first_];
  const Tensor x = l == first_ ? a_.encoded : a_.layers[l - 1 - first_].res3;
  be_.rmsnorm_forward(L.ln1, L.ln1_rstd, x, param(w, u, kNorm1), static_cast<float>(s_.norm_eps));
  be_.matmul_forward(L.qkv, L.ln1, fused(w, u, kQ, s_.qkv_width()), qkv_bias(w, u), kOutIn);
  if (lora_) lora_->forward(BlockMatmul::kQkv, L.ln1, L.qkv);  // before RoPE, as PEFT's q_proj/k_proj output
  be_.rope_forward(L.qkv, inv_freq_, s_.n_head + s_.n_kv_head);  // q's heads, then k's
  be_.attention_forward(L.atty, L.lse, L.qkv, s_.n_head, segments_.tensor());
  be_.matmul_forward(a_.proj, L.atty, param(w, u, kO), Tensor(), kOutIn);
  if (lora_) lora_->forward(BlockMatmul::kAttnOut, L.atty, a_.proj);
  be_.add_rmsnorm_forward(L.res2, L.ln2, L.ln2_rstd, x, a_.proj, param(w, u, kNorm2), static_cast<float>(s_.norm_eps));
  be_.matmul_forward(L.gu, L.ln2, fused(w, u, kGate, 2 * std::int64_t{s_.ffn_hidden}), Tensor(), kOutIn);
  if (lora_) lora_->forward(BlockMatmul::kMlpUp, L.ln2, L.gu);
  be_.swiglu_forward(L.act, L.gu);
  be_.matmul_forward(a_.proj, L.act, param(w, u, kDown), Tensor(), kOutIn);
  if (lora_) lora_->forward(BlockMatmul::kMlpDown, L.act, a_.proj);
  be_.add(L.res3, L.res2, a_.proj);
}

// A pipeline stage runs its part (as gpt2.cpp's run_forward).
void Llama::run_forward(const std::int32_t* tokens, ParamSource& params) {
  const int last = s_.n_layer + 1;
  if (embeds_) {
    check_ids("token", tokens);
    be_.copy_from_host(a_.tokens.data, tokens, a_.tokens.bytes());
    Tensor emb = params.unit(0);
    be_.embedding_forward(a_.encoded, a_.tokens, param(emb, 0, 0), Tensor());
    params.release(0);
  }
  for (int l = first_; l < end_; ++l) {
    if (lora_) lora_->begin_block(l, false);
    block_forward(l, params.unit(1 + l));
    params.release(1 + l);
    if (lora_) lora_->end_block(l, false);
  }
  if (!heads_) return;
  Tensor fin = params.unit(last);
  be_.rmsnorm_forward(a_.lnf, a_.lnf_rstd, a_.layers.back().res3, param(fin, last, kNormF), static_cast<float>(s_.norm_eps));
  if (s_.tie_embeddings) {
    params.release(last);
    fin = params.unit(0);
  }
  be_.matmul_forward(a_.logits, a_.lnf, head_weight(fin), Tensor(), kOutIn);  // logits over all Vp rows
  params.release(s_.tie_embeddings ? 0 : last);
}

double Llama::forward(const std::int32_t* tokens, const std::int32_t* targets, ParamSource& params) {
  if (heads_) check_target_ids(targets, std::int64_t{B_} * s_.seq_len, s_.vocab_size);
  run_forward(tokens, params);
  const double sum = heads_ ? sum_token_losses(be_, a_.losses, a_.logits, a_.targets, targets, s_.vocab_size) : 0.0;
  ready_for_backward_ = true;
  return sum;
}

std::vector<float> Llama::forward_logits(const std::int32_t* tokens, ParamSource& params) {
  run_forward(tokens, params);
  ready_for_backward_ = false;
  return heads_ ? unpadded_logits(be_, a_.logits, s_.vocab_size) : std::vector<float>{};
}

// dres holds d(block output) on entry and d(block input) on exit; parameter grads accumulate (+=).
void Llama::block_backward(int l, const Tensor& w, const Tensor& g) {
  const int u = 1 + l;
  Layer& L = a_.layers[l - first_];
  const Tensor x = l == first_ ? a_.encoded : a_.layers[l - 1 - first_].res3;
  const std::int64_t T = s_.seq_len, W = s_.qkv_width(), F2 = 2 * std::int64_t{s_.ffn_hidden};
  const Tensor dgu(a_.dbig.data, dtype_, {B_, T, F2}), dqkv(a_.dbig.data, dtype_, {B_, T, W});
  // MLP: res3 = res2 + swiglu(ln2 [Wgate|Wup]^T) Wdown^T
  be_.matmul_backward(a_.dact, grad(g, u, kDown), Tensor(), a_.dres, L.act, param(w, u, kDown), kOutIn);
  if (lora_) lora_->backward(BlockMatmul::kMlpDown, L.act, a_.dres, a_.dact);
  be_.swiglu_backward(dgu, L.gu, a_.dact);
  be_.matmul_backward(a_.dln, fused_grad(g, u, kGate, F2), Tensor(), dgu, L.ln2, fused(w, u, kGate, F2), kOutIn);
  if (lora_) lora_->backward(BlockMatmul::kMlpUp, L.ln2, dgu, a_.dln);
  // d res2 = d res3 (residual path) + through the norm
  be_.rmsnorm_backward_accumulate(a_.dres, norm_grad(g, u, kNorm2), a_.dln, L.res2, param(w, u, kNorm2), L.ln2_rstd);
  // attention: res2 = x + attn(RoPE(ln1 [Wq|Wk|Wv]^T)) Wo^T
  be_.matmul_backward(a_.dln, grad(g, u, kO), Tensor(), a_.dres, L.atty, param(w, u, kO), kOutIn);
  if (lora_) lora_->backward(BlockMatmul::kAttnOut, L.atty, a_.dres, a_.dln);
  be_.attention_backward(dqkv, a_.dln, L.qkv, L.atty, L.lse, s_.n_head, segments_.tensor());
  be_.rope_backward(dqkv, inv_freq_, s_.n_head + s_.n_kv_head);
  be_.matmul_backward(a_.dln, fused_grad(g, u, kQ, W), qkv_bias(g, u), dqkv, L.ln1, fused(w, u, kQ, W), kOutIn);
  if (lora_) lora_->backward(BlockMatmul::kQkv, L.ln1, dqkv, a_.dln);
  // d x = d res2 + through the norm
  be_.rmsnorm_backward_accumulate(a_.dres, norm_grad(g, u, kNorm1), a_.dln, x, param(w, u, kNorm1), L.ln1_rstd);
}

// Full: the whole block forward again (bit-identical). Selective: attention from the kept (rotated) qkv,
// SwiGLU from the kept gate|up.
void Llama::recompute_block(int l, const Tensor& w) {
  if (recompute_ == Recompute::kFull) return block_forward(l, w);
  if (recompute_ == Recompute::kSelective) {
    Layer& L = a_.layers[l - first_];
    be_.attention_forward(L.atty, L.lse, L.qkv, s_.n_head, segments_.tensor());
    be_.swiglu_forward(L.act, L.gu);
  }
}

// A stage without the head starts from d(its output) in a_.dres; one without the embedding leaves d(its
// input) there (as gpt2.cpp's backward).
void Llama::backward(ParamSource& params, GradSink& grads, float dloss) {
  ZT_CHECK(ready_for_backward_, "Llama::backward needs a forward() with targets first (and runs once per forward)");
  ready_for_backward_ = false;
  const int last = s_.n_layer + 1;
  Tensor w, g;
  if (heads_) {
    const Tensor top = a_.layers.back().res3;
    be_.cross_entropy_backward(a_.logits, a_.logits, a_.targets, dloss, s_.vocab_size);  // dlogits in place
    if (s_.tie_embeddings) {  // the head is embed_tokens: dlnf = dlogits E, dE += dlogits^T lnf
      w = params.unit(0);
      g = grads.unit(0);
      be_.matmul_backward(a_.dln, head_grad(g), Tensor(), a_.logits, a_.lnf, head_weight(w), kOutIn);
      params.release(0);
      if (!embeds_) grads.unit_done(0);  // the last stage's copy of embed_tokens: final for this pass
    }
    w = params.unit(last);  // separate statements: the ParamSource sees p before g, always
    g = grads.unit(last);
    if (!s_.tie_embeddings)
      be_.matmul_backward(a_.dln, head_grad(g), Tensor(), a_.logits, a_.lnf, head_weight(w), kOutIn);
    be_.rmsnorm_backward(a_.dres, norm_grad(g, last, kNormF), a_.dln, top, param(w, last, kNormF), a_.lnf_rstd);
    params.release(last);
    grads.unit_done(last);
  }
  for (int l = end_ - 1; l >= first_; --l) {
    w = params.unit(1 + l);
    g = grads.unit(1 + l);
    if (lora_) lora_->begin_block(l, true);
    recompute_block(l, w);
    block_backward(l, w, g);
    params.release(1 + l);
    grads.unit_done(1 + l);
    if (lora_) lora_->end_block(l, true);
  }
  if (!embeds_) return;
  g = grads.unit(0);
  if (!g.empty()) be_.embedding_backward(param(g, 0, 0), Tensor(), a_.dres, a_.tokens);
  grads.unit_done(0);
}

}  // namespace zt::model
