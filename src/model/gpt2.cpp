// GPT-2 forward and backward over the backend's ops (llm.c's train_gpt2.c structure): activations live in
// one arena allocated at construction; parameters and gradients are taken unit by unit (param_source.hpp).
#include "model/gpt2.hpp"

#include <algorithm>

#include "backend/host_convert.hpp"
#include "core/error.hpp"
#include "model/carver.hpp"
#include "model/lm_head.hpp"

namespace zt::model {

using backend::Tensor;
using backend::WeightLayout;

namespace {
// Parameter order inside a block unit (param_table.cpp) and inside units 0 and L+1.
enum BlockParam { kLn1W, kLn1B, kAttnW, kAttnB, kAttnProjW, kAttnProjB, kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB };
enum EmbedParam { kWte, kWpe };
enum FinalParam { kLnfW, kLnfB };

}  // namespace

std::size_t Gpt2::layout(const GptShape& s, int B, Recompute r, DType compute, std::byte* base, Acts* acts,
                          Stage stage) {
  Acts scratch;
  Acts& a = acts ? *acts : scratch;
  Carver c{base, compute};
  const std::int64_t T = s.seq_len, C = s.n_embd, N = std::int64_t{B} * T;
  a.encoded = c.take({B, T, C});
  // One working set of block activations, shared by every block where the mode recomputes them.
  Layer work;
  const bool full = r == Recompute::kFull, selective = r != Recompute::kNone;
  a.layers.resize(stage.end(s.n_layer) - stage.first_block);  // this stage's blocks only
  for (Layer& l : a.layers) {
    l.ln1 = c.per_block(full, work.ln1, {B, T, C});
    l.ln1_mean = c.per_block(full, work.ln1_mean, {N}, true);
    l.ln1_rstd = c.per_block(full, work.ln1_rstd, {N}, true);
    l.qkv = c.per_block(full, work.qkv, {B, T, 3 * C});
    l.atty = c.per_block(selective, work.atty, {B, T, C});
    l.lse = c.per_block(full, work.lse, {B, s.n_head, T}, true);
    l.res2 = c.per_block(full, work.res2, {B, T, C});
    l.ln2 = c.per_block(full, work.ln2, {B, T, C});
    l.ln2_mean = c.per_block(full, work.ln2_mean, {N}, true);
    l.ln2_rstd = c.per_block(full, work.ln2_rstd, {N}, true);
    l.fch = c.per_block(full, work.fch, {B, T, 4 * C});
    l.fch_gelu = c.per_block(selective, work.fch_gelu, {B, T, 4 * C});
    l.res3 = c.take({B, T, C});  // block outputs are always kept: the next block's input
  }
  if (stage.has_head(s.n_layer)) {
    a.lnf = c.take({B, T, C}), a.lnf_mean = c.stat({N}), a.lnf_rstd = c.stat({N});
    a.logits = c.take({B, T, s.padded_vocab}), a.losses = c.stat({N});
  }
  a.proj = c.take({B, T, C});
  a.dres = c.take({B, T, C}), a.dtmp = c.take({B, T, C}), a.dln = c.take({B, T, C}), a.dbig = c.take({B, T, 4 * C});
  a.dnorm_w = c.stat({C}), a.dnorm_b = c.stat({C});
  return c.used;
}

std::size_t Gpt2::activation_bytes(const GptShape& shape, int micro_batch, Recompute recompute, DType compute,
                                 Stage stage) {
  return layout(shape, micro_batch, recompute, compute, nullptr, nullptr, stage) +
         2 * static_cast<std::size_t>(micro_batch) * shape.seq_len * sizeof(std::int32_t);
}

Gpt2::Gpt2(backend::Backend& backend, const ParamTable& table, int micro_batch, Recompute recompute, DType compute,
           Stage stage)
    : be_(backend), table_(table), s_(table.shape()), B_(micro_batch), recompute_(recompute), dtype_(compute),
      stage_(stage), first_(stage.first_block), end_(stage.end(s_.n_layer)), embeds_(stage.has_embedding()),
      heads_(stage.has_head(s_.n_layer)) {
  ZT_CHECK_GT(micro_batch, 0, "Gpt2: micro_batch must be positive");
  ZT_CHECK(s_.arch == Arch::kGpt2, "Gpt2: the parameter table is not GPT-2's (use make_model)");
  ZT_CHECK(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
           "Gpt2: compute dtype must be f32, bf16 or f16, not ", dtype_name(compute));
  ZT_CHECK(first_ >= 0 && first_ < end_ && end_ <= s_.n_layer, "Gpt2: stage blocks [", first_, ", ", end_, ") outside the model's ", s_.n_layer);
  arena_ = be_.allocate(layout(s_, B_, recompute_, dtype_, nullptr, nullptr, stage_));
  layout(s_, B_, recompute_, dtype_, static_cast<std::byte*>(arena_.data()), &a_, stage_);
  ids_ = be_.allocate(2 * static_cast<std::size_t>(B_) * s_.seq_len * sizeof(std::int32_t));
  a_.tokens = ids_.view(DType::kI32, {B_, s_.seq_len});
  a_.targets = ids_.view(DType::kI32, {B_, s_.seq_len}, std::int64_t{B_} * s_.seq_len);
}

Tensor Gpt2::param(const Tensor& unit, int u, int k) const {
  return param_view(table_, unit, table_.first_param(u) + k);
}

Tensor Gpt2::grad(const Tensor& g, int u, int k) const { return g.empty() ? Tensor() : param(g, u, k); }

Tensor Gpt2::norm_grad(const Tensor& g, int u, int k, bool bias) const {
  if (!g.empty()) return param(g, u, k);
  return bias ? a_.dnorm_b : a_.dnorm_w;
}

void Gpt2::check_ids(const char* what, const std::int32_t* ids) const {
  check_token_ids(what, ids, std::int64_t{B_} * s_.seq_len, s_.vocab_size);
}

// x = layer input; ln1 = LN(x); qkv = ln1 Wqkv + b; atty = attn(qkv); res2 = x + atty Wproj + b;
// ln2 = LN(res2); fch = ln2 Wfc + b; res3 = res2 + gelu(fch) Wfcproj + b.
void Gpt2::block_forward(int l, const Tensor& w) {
  const int u = 1 + l;
  Layer& L = a_.layers[l - first_];
  const Tensor x = l == first_ ? a_.encoded : a_.layers[l - 1 - first_].res3;
  be_.layernorm_forward(L.ln1, L.ln1_mean, L.ln1_rstd, x, param(w, u, kLn1W), param(w, u, kLn1B));
  be_.matmul_forward(L.qkv, L.ln1, param(w, u, kAttnW), param(w, u, kAttnB), WeightLayout::kInOut);
  if (lora_) lora_->forward(BlockMatmul::kQkv, L.ln1, L.qkv);
  be_.attention_forward(L.atty, L.lse, L.qkv, s_.n_head, segments_.tensor());
  be_.matmul_forward(a_.proj, L.atty, param(w, u, kAttnProjW), param(w, u, kAttnProjB), WeightLayout::kInOut);
  if (lora_) lora_->forward(BlockMatmul::kAttnOut, L.atty, a_.proj);
  be_.add(L.res2, x, a_.proj);
  be_.layernorm_forward(L.ln2, L.ln2_mean, L.ln2_rstd, L.res2, param(w, u, kLn2W), param(w, u, kLn2B));
  be_.matmul_forward(L.fch, L.ln2, param(w, u, kFcW), param(w, u, kFcB), WeightLayout::kInOut);
  if (lora_) lora_->forward(BlockMatmul::kMlpUp, L.ln2, L.fch);
  be_.gelu_forward(L.fch_gelu, L.fch);
  be_.matmul_forward(a_.proj, L.fch_gelu, param(w, u, kFcProjW), param(w, u, kFcProjB), WeightLayout::kInOut);
  if (lora_) lora_->forward(BlockMatmul::kMlpDown, L.fch_gelu, a_.proj);
  be_.add(L.res3, L.res2, a_.proj);
}

// A pipeline stage runs its part: the embedding on the first (else its input is in a_.encoded, the
// previous stage's output), its blocks, and the final norm and head on the last.
void Gpt2::run_forward(const std::int32_t* tokens, ParamSource& params) {
  const int last = s_.n_layer + 1;
  if (embeds_) {
    check_ids("token", tokens);
    be_.copy_from_host(a_.tokens.data, tokens, a_.tokens.bytes());
    Tensor emb = params.unit(0);
    be_.embedding_forward(a_.encoded, a_.tokens, param(emb, 0, kWte), param(emb, 0, kWpe));
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
  const Tensor top = a_.layers.back().res3;
  be_.layernorm_forward(a_.lnf, a_.lnf_mean, a_.lnf_rstd, top, param(fin, last, kLnfW), param(fin, last, kLnfB));
  params.release(last);
  Tensor emb = params.unit(0);  // the tied LM head: logits = lnf @ wte^T over all Vp rows
  be_.matmul_forward(a_.logits, a_.lnf, param(emb, 0, kWte), Tensor(), WeightLayout::kOutIn);
  params.release(0);
}

double Gpt2::forward(const std::int32_t* tokens, const std::int32_t* targets, ParamSource& params) {
  if (heads_) check_target_ids(targets, std::int64_t{B_} * s_.seq_len, s_.vocab_size);
  run_forward(tokens, params);
  const double sum = heads_ ? sum_token_losses(be_, a_.losses, a_.logits, a_.targets, targets, s_.vocab_size) : 0.0;
  ready_for_backward_ = true;
  return sum;
}

std::vector<float> Gpt2::forward_logits(const std::int32_t* tokens, ParamSource& params) {
  run_forward(tokens, params);
  ready_for_backward_ = false;
  return heads_ ? unpadded_logits(be_, a_.logits, s_.vocab_size) : std::vector<float>{};
}

// dres holds d(block output) on entry and d(block input) on exit. Parameter grads accumulate (+=);
// dres, dtmp, dln and dbig are reused from block to block.
void Gpt2::block_backward(int l, const Tensor& w, const Tensor& g) {
  const int u = 1 + l;
  Layer& L = a_.layers[l - first_];
  const Tensor x = l == first_ ? a_.encoded : a_.layers[l - 1 - first_].res3;
  const Tensor dfch = a_.dbig;  // [B,T,4C]
  const Tensor dqkv(a_.dbig.data, dtype_, {B_, s_.seq_len, 3 * std::int64_t{s_.n_embd}});
  // MLP: res3 = res2 + gelu(fch) Wfcproj + b
  be_.matmul_backward(dfch, grad(g, u, kFcProjW), grad(g, u, kFcProjB), a_.dres, L.fch_gelu, param(w, u, kFcProjW),
                      WeightLayout::kInOut);
  if (lora_) lora_->backward(BlockMatmul::kMlpDown, L.fch_gelu, a_.dres, dfch);
  be_.gelu_backward(dfch, L.fch, dfch);
  be_.matmul_backward(a_.dln, grad(g, u, kFcW), grad(g, u, kFcB), dfch, L.ln2, param(w, u, kFcW),
                      WeightLayout::kInOut);
  if (lora_) lora_->backward(BlockMatmul::kMlpUp, L.ln2, dfch, a_.dln);
  be_.layernorm_backward(a_.dtmp, norm_grad(g, u, kLn2W, false), norm_grad(g, u, kLn2B, true), a_.dln, L.res2, param(w, u, kLn2W),
                         L.ln2_mean, L.ln2_rstd);
  be_.accumulate(a_.dres, a_.dtmp);  // d res2 = d res3 (residual path) + through ln2
  // attention: res2 = x + atty Wproj + b
  be_.matmul_backward(a_.dln, grad(g, u, kAttnProjW), grad(g, u, kAttnProjB), a_.dres, L.atty,
                      param(w, u, kAttnProjW), WeightLayout::kInOut);
  if (lora_) lora_->backward(BlockMatmul::kAttnOut, L.atty, a_.dres, a_.dln);
  be_.attention_backward(dqkv, a_.dln, L.qkv, L.atty, L.lse, s_.n_head, segments_.tensor());
  be_.matmul_backward(a_.dln, grad(g, u, kAttnW), grad(g, u, kAttnB), dqkv, L.ln1, param(w, u, kAttnW),
                      WeightLayout::kInOut);
  if (lora_) lora_->backward(BlockMatmul::kQkv, L.ln1, dqkv, a_.dln);
  be_.layernorm_backward(a_.dtmp, norm_grad(g, u, kLn1W, false), norm_grad(g, u, kLn1B, true), a_.dln, x, param(w, u, kLn1W),
                         L.ln1_mean, L.ln1_rstd);
  be_.accumulate(a_.dres, a_.dtmp);  // d x = d res2 + through ln1
}

// Rebuilds what block l's backward reads and the mode did not keep. Full: the whole block forward
// again (its output res3 comes out bit-identical to the kept one). Selective: the attention output
// from the kept qkv, and GELU of the kept fc pre-activation.
void Gpt2::recompute_block(int l, const Tensor& w) {
  if (recompute_ == Recompute::kFull) return block_forward(l, w);
  if (recompute_ == Recompute::kSelective) {
    Layer& L = a_.layers[l - first_];
    be_.attention_forward(L.atty, L.lse, L.qkv, s_.n_head, segments_.tensor());
    be_.gelu_forward(L.fch_gelu, L.fch);
  }
}

// A stage without the head starts from d(its output) in a_.dres (stage_output_grad); a stage without
// the embedding leaves d(its input) there (stage_input_grad).
void Gpt2::backward(ParamSource& params, GradSink& grads, float dloss) {
  ZT_CHECK(ready_for_backward_, "Gpt2::backward needs a forward() with targets first (and runs once per forward)");
  ready_for_backward_ = false;
  const int last = s_.n_layer + 1;
  Tensor w, g;
  if (heads_) {
    be_.cross_entropy_backward(a_.logits, a_.logits, a_.targets, dloss, s_.vocab_size);  // dlogits in place
    w = params.unit(0), g = grads.unit(0);  // LM head: dlnf = dlogits wte, dwte += dlogits^T lnf
    be_.matmul_backward(a_.dln, grad(g, 0, kWte), Tensor(), a_.logits, a_.lnf, param(w, 0, kWte), WeightLayout::kOutIn);
    params.release(0);
    if (!embeds_) grads.unit_done(0);  // the last stage's copy of wte: final for this pass
    w = params.unit(last), g = grads.unit(last);
    const Tensor top = a_.layers.back().res3;
    be_.layernorm_backward(a_.dres, norm_grad(g, last, kLnfW, false), norm_grad(g, last, kLnfB, true), a_.dln, top,
                           param(w, last, kLnfW), a_.lnf_mean, a_.lnf_rstd);
    params.release(last);
    grads.unit_done(last);
  }
  for (int l = end_ - 1; l >= first_; --l) {
    w = params.unit(1 + l);  // separate statements: the ParamSource sees p before g, always
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
  if (!g.empty()) be_.embedding_backward(param(g, 0, kWte), param(g, 0, kWpe), a_.dres, a_.tokens);
  grads.unit_done(0);
}

}  // namespace zt::model
