// Llama over a tensor-parallel group (llama_tp.hpp): model::Llama's structure with Megatron's layers.
#include "tp/llama_tp.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/carver.hpp"
#include "model/lm_head.hpp"
#include "model/tp_split.hpp"
#include "model/rope.hpp"

namespace zt::tp {

using backend::Tensor;

namespace {
enum BlockParam { kNorm1, kQ, kK, kV, kO, kNorm2, kGate, kUp, kDown, kQBias };  // param_table.cpp's order
enum FinalParam { kNormF, kHead };
constexpr backend::WeightLayout kOutIn = backend::WeightLayout::kOutIn;
}  // namespace

LlamaTp::LlamaTp(backend::Backend& backend, dist::Communicator& group, const model::ParamTable& local, int micro_batch,
                 bool sequence_parallel, model::Recompute recompute, DType compute, model::Stage stage)
    : be_(backend), ctx_{backend, group, sequence_parallel}, table_(local), s_(local.shape()), B_(micro_batch),
      tp_(group.size()), r_(group.rank()), sp_(sequence_parallel), recompute_(recompute), dtype_(compute),
      first_(stage.first_block), end_(stage.end(s_.n_layer)), embeds_(stage.has_embedding()),
      has_head_(stage.has_head(s_.n_layer)), Vs_(model::vocab_shard_rows(local.shape(), group.size())),
      heads_(s_.n_head / tp_), kv_heads_(s_.n_kv_head / tp_), qkv_width_(std::int64_t{s_.qkv_width()} / tp_),
      ffn_(s_.ffn_hidden / tp_) {
  ZT_CHECK(s_.arch == model::Arch::kLlama, "LlamaTp: the table is not Llama's");
  ZT_CHECK(!sp_ || (std::int64_t{B_} * s_.seq_len) % tp_ == 0, "LlamaTp: sequence parallelism needs tp to divide B*T");
  ZT_CHECK(first_ >= 0 && first_ < end_ && end_ <= s_.n_layer, "LlamaTp: stage blocks [", first_, ", ", end_,
           ") outside the model's ", s_.n_layer);
  if (embeds_ || has_head_) {  // the vocabulary table it reads (a tied head's copy of embed_tokens on the last stage)
    const char* vocab_table = embeds_ || s_.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    ZT_CHECK_EQ(local.find(vocab_table).shape[0], Vs_ + 1, "LlamaTp: table is not tp_local_table(.., ", tp_, ")");
  }
  ZT_CHECK(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
           "LlamaTp: compute dtype must be f32, bf16 or f16, not ", dtype_name(compute));
  arena_ = be_.allocate(layout(s_, B_, tp_, sp_, recompute_, dtype_, stage, nullptr, nullptr));
  layout(s_, B_, tp_, sp_, recompute_, dtype_, stage, static_cast<std::byte*>(arena_.data()), &a_);
  const std::vector<float> inv = model::rope_inv_freq(s_.head_size(), s_.rope);
  be_.copy_from_host(a_.inv_freq.data, inv.data(), a_.inv_freq.bytes());
}

std::size_t LlamaTp::activation_bytes(const model::GptShape& shape, int micro_batch, int tp, bool sequence_parallel,
                                      model::Recompute recompute, DType compute, model::Stage stage) {
  return layout(shape, micro_batch, tp, sequence_parallel, recompute, compute, stage, nullptr, nullptr);
}

// As model::Llama::layout (and Gpt2Tp::layout): activations in the compute dtype, statistics and the
// RoPE frequencies in f32, what the Recompute mode rebuilds shared by every block; a pipeline stage's
// blocks only, the token rows on the first stage, the head's on the last.
std::size_t LlamaTp::layout(const model::GptShape& s, int B, int tp, bool sp, model::Recompute r, DType compute,
                            model::Stage stage, std::byte* base, Acts* acts) {
  Acts scratch;
  Acts& a = acts ? *acts : scratch;
  model::Carver c{base, compute};
  const std::int64_t T = s.seq_len, C = s.n_embd, N = std::int64_t{B} * T, R = sp ? N / tp : N;
  const std::int64_t Vs = model::vocab_shard_rows(s, tp), heads = s.n_head / tp, qkv_width = std::int64_t{s.qkv_width()} / tp;
  const std::int64_t ffn = s.ffn_hidden / tp;
  const bool full = r == model::Recompute::kFull, selective = r != model::Recompute::kNone;
  Layer work;
  if (stage.has_embedding()) a.rows = c.take_as(DType::kI32, {B, T});
  a.inv_freq = c.stat({s.head_size() / 2});
  a.encoded = c.take({R, C});
  a.layers.resize(static_cast<std::size_t>(stage.end(s.n_layer) - stage.first_block));
  for (Layer& l : a.layers) {
    l.ln1 = c.per_block(full, work.ln1, {R, C}), l.ln1_rstd = c.per_block(full, work.ln1_rstd, {R}, true);
    l.qkv = c.per_block(full, work.qkv, {B, T, qkv_width});
    l.atty = c.per_block(selective, work.atty, {B, T, C / tp});
    l.lse = c.per_block(full, work.lse, {B, heads, T}, true);
    l.res2 = c.per_block(full, work.res2, {R, C});
    l.ln2 = c.per_block(full, work.ln2, {R, C}), l.ln2_rstd = c.per_block(full, work.ln2_rstd, {R}, true);
    l.gu = c.per_block(full, work.gu, {B, T, 2 * ffn});
    l.act = c.per_block(selective, work.act, {B, T, ffn});
    l.res3 = c.take({R, C});  // block outputs are always kept: the next block's input
  }
  if (stage.has_head(s.n_layer)) {
    a.lnf = c.take({R, C}), a.lnf_rstd = c.stat({R});
    a.logits = c.take({B, T, Vs});
  }
  a.proj = c.take({R, C}), a.dres = c.take({R, C}), a.dtmp = c.take({R, C}), a.dln = c.take({R, C});
  a.datty = c.take({B, T, C / tp}), a.dbig = c.take({B, T, std::max(qkv_width, 2 * ffn)}), a.dact = c.take({B, T, ffn});
  if (sp) a.full = c.take({N, C}), a.dfull = c.take({N, C});
  a.dnorm = c.stat({C});
  return c.used;
}

// A column-parallel layer's input for its backward: under SP gathered again from this rank's rows into
// the shared scratch (Megatron-SP keeps only the rows and re-gathers, so the full [B*T, C] inputs are
// never stored per block), else the kept tensor itself.
Tensor LlamaTp::input_of(const Tensor& mine) {
  if (!sp_) return mine;
  gather_rows(ctx_, mine, a_.full);
  return a_.full;
}

Tensor LlamaTp::btc(Tensor t) const { return Tensor(t.data, t.dtype, {B_, s_.seq_len, t.dim(-1)}); }

// Under SP the norm's weight gradient from this rank's rows is partial: summed over the group first. A
// frozen norm's (empty dweight: LoRA's base) goes to the scratch and is dropped, with no collective.
void LlamaTp::norm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dout, const Tensor& inp,
                            const Tensor& weight, const Tensor& rstd) {
  if (!sp_ && !dweight.empty()) return be_.rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd);
  be_.fill_zero(a_.dnorm);
  be_.rmsnorm_backward(dinp, a_.dnorm, dout, inp, weight, rstd);
  if (dweight.empty()) return;
  all_reduce_sum(ctx_, a_.dnorm);
  be_.accumulate(dweight, a_.dnorm);
}

Tensor LlamaTp::param(const Tensor& unit, int u, int k) const {
  return model::param_view(table_, unit, table_.first_param(u) + k);
}

Tensor LlamaTp::fused(const Tensor& unit, int u, int k, std::int64_t rows) const {
  return Tensor(param(unit, u, k).data, unit.dtype, {rows, s_.n_embd});
}

Tensor LlamaTp::qkv_bias(const Tensor& unit, int u) const {
  if (!s_.qkv_bias || unit.empty()) return Tensor();
  return Tensor(param(unit, u, kQBias).data, unit.dtype, {qkv_width_});  // q_r|k_r|v_r's biases, adjacent
}

Tensor LlamaTp::grad(const Tensor& g, int u, int k) const { return g.empty() ? Tensor() : param(g, u, k); }

Tensor LlamaTp::fused_grad(const Tensor& g, int u, int k, std::int64_t rows) const {
  return g.empty() ? Tensor() : fused(g, u, k, rows);
}

void LlamaTp::set_lora(model::Lora* lora) {
  lora_ = lora;
  if (lora_) connect_lora(*lora_, ctx_, "LlamaTp");
}

Tensor LlamaTp::vocab_rows(Tensor table) const {
  table.shape[0] = Vs_;
  return table;
}

Tensor LlamaTp::head(const Tensor& unit) const {
  return vocab_rows(s_.tie_embeddings ? param(unit, 0, 0) : param(unit, s_.n_layer + 1, kHead));
}

// As model::Llama::block_forward: q_r|k_r|v_r and gate_r|up_r column-parallel (this rank's heads and
// units, adjacent in its shard), o and down row-parallel; LoRA as in Gpt2Tp::block_forward (q|k|v's
// before RoPE, as PEFT adapts q_proj's and k_proj's outputs).
void LlamaTp::block_forward(int l, const Tensor& w) {
  using model::BlockMatmul;
  const int u = 1 + l;
  Layer& L = layer(l);
  const Tensor x = block_input(l);
  be_.rmsnorm_forward(L.ln1, L.ln1_rstd, x, param(w, u, kNorm1), static_cast<float>(s_.norm_eps));
  column_parallel_forward(ctx_, L.qkv, L.ln1, sp_ ? a_.full : L.ln1, fused(w, u, kQ, qkv_width_), qkv_bias(w, u),
                          kOutIn);
  if (lora_) lora_->forward(BlockMatmul::kQkv, sp_ ? a_.full : L.ln1, L.qkv);
  be_.rope_forward(L.qkv, a_.inv_freq, static_cast<int>(heads_ + kv_heads_));
  be_.attention_forward(L.atty, L.lse, L.qkv, static_cast<int>(heads_), segments_.tensor());
  row_parallel_forward(ctx_, a_.proj, sp_ ? a_.full : a_.proj, L.atty, param(w, u, kO), Tensor(), kOutIn,
                       lora_forward_hook(lora_, BlockMatmul::kAttnOut, L.atty));
  be_.add(L.res2, x, a_.proj);
  be_.rmsnorm_forward(L.ln2, L.ln2_rstd, L.res2, param(w, u, kNorm2), static_cast<float>(s_.norm_eps));
  column_parallel_forward(ctx_, L.gu, L.ln2, sp_ ? a_.full : L.ln2, fused(w, u, kGate, 2 * ffn_), Tensor(), kOutIn);
  if (lora_) lora_->forward(BlockMatmul::kMlpUp, sp_ ? a_.full : L.ln2, L.gu);
  be_.swiglu_forward(L.act, L.gu);
  row_parallel_forward(ctx_, a_.proj, sp_ ? a_.full : a_.proj, L.act, param(w, u, kDown), Tensor(), kOutIn,
                       lora_forward_hook(lora_, BlockMatmul::kMlpDown, L.act));
  be_.add(L.res3, L.res2, a_.proj);
}

// A pipeline stage runs its part, as Gpt2Tp::run_forward.
void LlamaTp::run_forward(const std::int32_t* tokens, model::ParamSource& params) {
  const int last = s_.n_layer + 1;
  if (embeds_) {
    Tensor emb = params.unit(0);
    vocab_parallel_embed_tokens(ctx_, sp_ ? a_.encoded : btc(a_.encoded), btc(sp_ ? a_.full : a_.encoded), tokens,
                                s_.vocab_size, a_.rows, param(emb, 0, 0), Tensor());
    params.release(0);
  }
  for (int l = first_; l < end_; ++l) {
    if (lora_) lora_->begin_block(l, false);
    block_forward(l, params.unit(1 + l));
    params.release(1 + l);
    if (lora_) lora_->end_block(l, false);
  }
  if (!has_head_) return;
  Tensor fin = params.unit(last);
  be_.rmsnorm_forward(a_.lnf, a_.lnf_rstd, a_.layers.back().res3, param(fin, last, kNormF), static_cast<float>(s_.norm_eps));
  if (s_.tie_embeddings) {
    params.release(last);
    fin = params.unit(0);
  }
  column_parallel_forward(ctx_, a_.logits, a_.lnf, sp_ ? a_.full : a_.lnf, head(fin), Tensor(), kOutIn);
  params.release(head_unit());
}

double LlamaTp::forward(const std::int32_t* tokens, const std::int32_t* targets, model::ParamSource& params) {
  if (has_head_)  // -1: outside the loss mask
    model::check_target_ids(targets, std::int64_t{B_} * s_.seq_len, s_.vocab_size);
  run_forward(tokens, params);
  double sum = 0.0;
  if (has_head_)
    for (float x : ce_.forward(ctx_, a_.logits, targets, r_ * Vs_, s_.vocab_size)) sum += x;
  ready_for_backward_ = true;
  return sum;
}

std::vector<float> LlamaTp::forward_logits(const std::int32_t* tokens, model::ParamSource& params) {
  run_forward(tokens, params);
  ready_for_backward_ = false;
  return has_head_ ? gather_logits(ctx_, a_.logits, s_.vocab_size) : std::vector<float>{};
}

// LoRA as in Gpt2Tp::block_backward (q|k|v's adapters take the gradient before RoPE, as they joined).
void LlamaTp::block_backward(int l, const Tensor& w, const Tensor& g) {
  using model::BlockMatmul;
  const int u = 1 + l;
  Layer& L = layer(l);
  const Tensor x = block_input(l);
  const std::int64_t T = s_.seq_len;
  const Tensor dgu(a_.dbig.data, dtype_, {B_, T, 2 * ffn_}), dqkv(a_.dbig.data, dtype_, {B_, T, qkv_width_});
  const Tensor dout = sp_ ? a_.dfull : a_.dres;  // a row-parallel layer's whole dout, once it ran
  row_parallel_backward(ctx_, a_.dact, a_.dfull, grad(g, u, kDown), Tensor(), a_.dres, L.act, param(w, u, kDown), kOutIn);
  if (lora_) lora_->backward(BlockMatmul::kMlpDown, L.act, dout, a_.dact);
  be_.swiglu_backward(dgu, L.gu, a_.dact);
  const Tensor ln2 = input_of(L.ln2);
  column_parallel_backward(ctx_, a_.dln, a_.dfull, fused_grad(g, u, kGate, 2 * ffn_), Tensor(), dgu, ln2,
                           fused(w, u, kGate, 2 * ffn_), kOutIn, lora_backward_hook(lora_, BlockMatmul::kMlpUp, ln2, dgu));
  norm_backward(a_.dtmp, grad(g, u, kNorm2), a_.dln, L.res2, param(w, u, kNorm2), L.ln2_rstd);
  be_.accumulate(a_.dres, a_.dtmp);
  row_parallel_backward(ctx_, a_.datty, a_.dfull, grad(g, u, kO), Tensor(), a_.dres, L.atty, param(w, u, kO), kOutIn);
  if (lora_) lora_->backward(BlockMatmul::kAttnOut, L.atty, dout, a_.datty);
  be_.attention_backward(dqkv, a_.datty, L.qkv, L.atty, L.lse, static_cast<int>(heads_), segments_.tensor());
  be_.rope_backward(dqkv, a_.inv_freq, static_cast<int>(heads_ + kv_heads_));
  const Tensor ln1 = input_of(L.ln1);
  column_parallel_backward(ctx_, a_.dln, a_.dfull, fused_grad(g, u, kQ, qkv_width_), qkv_bias(g, u), dqkv, ln1,
                           fused(w, u, kQ, qkv_width_), kOutIn, lora_backward_hook(lora_, BlockMatmul::kQkv, ln1, dqkv));
  norm_backward(a_.dtmp, grad(g, u, kNorm1), a_.dln, x, param(w, u, kNorm1), L.ln1_rstd);
  be_.accumulate(a_.dres, a_.dtmp);
}

// The cross-entropy, the LM head (tied: embed_tokens' shard, a copy on a last stage without the
// embedding) and the final norm, leaving d(last block's output) in a_.dres.
void LlamaTp::head_backward(model::ParamSource& params, model::GradSink& grads, float dloss) {
  const int last = s_.n_layer + 1;
  ce_.backward(ctx_, a_.logits, a_.logits, dloss);  // dlogits in place
  Tensor w, g;
  if (s_.tie_embeddings) {
    w = params.unit(0);
    g = grads.unit(0);
    column_parallel_backward(ctx_, a_.dln, a_.dfull, g.empty() ? Tensor() : head(g), Tensor(), a_.logits,
                             input_of(a_.lnf), head(w), kOutIn);
    params.release(0);
    if (!embeds_) grads.unit_done(0);  // the last stage's copy of embed_tokens' shard: final for this pass
  }
  w = params.unit(last);
  g = grads.unit(last);
  if (!s_.tie_embeddings)
    column_parallel_backward(ctx_, a_.dln, a_.dfull, g.empty() ? Tensor() : head(g), Tensor(), a_.logits,
                             input_of(a_.lnf), head(w), kOutIn);
  norm_backward(a_.dres, grad(g, last, kNormF), a_.dln, a_.layers.back().res3, param(w, last, kNormF), a_.lnf_rstd);
  params.release(last);
  grads.unit_done(last);
}

// As Gpt2Tp::recompute_block: full reruns the block forward (its collectives included); selective
// rebuilds attention from the kept qkv (RoPE already applied) and SwiGLU from the kept gate|up.
void LlamaTp::recompute_block(int l, const Tensor& w) {
  if (recompute_ == model::Recompute::kFull) return block_forward(l, w);
  if (recompute_ == model::Recompute::kSelective) {
    Layer& L = layer(l);
    be_.attention_forward(L.atty, L.lse, L.qkv, static_cast<int>(heads_), segments_.tensor());
    be_.swiglu_forward(L.act, L.gu);
  }
}

// The head's part (on the last stage), then the blocks, then the embedding (on the first stage): as
// Gpt2Tp::backward, a_.dres is the stage's output gradient on entry and its input gradient on exit.
void LlamaTp::backward(model::ParamSource& params, model::GradSink& grads, float dloss) {
  ZT_CHECK(ready_for_backward_, "LlamaTp::backward needs a forward() with targets first (and runs once per forward)");
  ready_for_backward_ = false;
  if (has_head_) head_backward(params, grads, dloss);
  Tensor w, g;
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
  if (!g.empty())  // a frozen embedding (LoRA's base) needs no gradient
    vocab_parallel_embedding_backward(ctx_, param(g, 0, 0), Tensor(), sp_ ? a_.dres : btc(a_.dres),
                                      sp_ ? btc(a_.dfull) : Tensor(), a_.rows);
  grads.unit_done(0);
}

}  // namespace zt::tp
