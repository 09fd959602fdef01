// GPT-2 over a tensor-parallel group (gpt2_tp.hpp): model::Gpt2's structure with Megatron's layers.
#include "tp/gpt2_tp.hpp"

#include "core/error.hpp"
#include "model/carver.hpp"
#include "model/lm_head.hpp"
#include "model/tp_split.hpp"

namespace zt::tp {

using backend::Tensor;
using backend::WeightLayout;

namespace {
// Parameter order inside a block unit and units 0 and L+1 (model/param_table.cpp).
enum BlockParam { kLn1W, kLn1B, kAttnW, kAttnB, kAttnProjW, kAttnProjB, kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB };
enum EmbedParam { kWte, kWpe };
enum FinalParam { kLnfW, kLnfB };
}  // namespace

Gpt2Tp::Gpt2Tp(backend::Backend& backend, dist::Communicator& group, const model::ParamTable& local, int micro_batch,
               bool sequence_parallel, model::Recompute recompute, DType compute, model::Stage stage)
    : be_(backend), ctx_{backend, group, sequence_parallel}, table_(local), s_(local.shape()), B_(micro_batch),
      tp_(group.size()), r_(group.rank()), sp_(sequence_parallel), recompute_(recompute), dtype_(compute),
      first_(stage.first_block), end_(stage.end(s_.n_layer)), embeds_(stage.has_embedding()),
      heads_(stage.has_head(s_.n_layer)), Vs_(model::vocab_shard_rows(local.shape(), tp_)) {
  ZT_CHECK(s_.arch == model::Arch::kGpt2, "Gpt2Tp: the table is not GPT-2's");
  ZT_CHECK(!sp_ || (std::int64_t{B_} * s_.seq_len) % tp_ == 0, "Gpt2Tp: sequence parallelism needs tp to divide B*T");
  ZT_CHECK(first_ >= 0 && first_ < end_ && end_ <= s_.n_layer, "Gpt2Tp: stage blocks [", first_, ", ", end_,
           ") outside the model's ", s_.n_layer);
  if (embeds_ || heads_)  // the token embedding (a tied head's copy on the last stage)
    ZT_CHECK_EQ(local.find("transformer.wte.weight").shape[0], Vs_ + 1, "Gpt2Tp: table is not tp_local_table(.., ",
                tp_, ")");
  ZT_CHECK(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
           "Gpt2Tp: compute dtype must be f32, bf16 or f16, not ", dtype_name(compute));
  arena_ = be_.allocate(layout(s_, B_, tp_, sp_, recompute_, dtype_, stage, nullptr, nullptr));
  layout(s_, B_, tp_, sp_, recompute_, dtype_, stage, static_cast<std::byte*>(arena_.data()), &a_);
}

std::size_t Gpt2Tp::activation_bytes(const model::GptShape& shape, int micro_batch, int tp, bool sequence_parallel,
                                     model::Recompute recompute, DType compute, model::Stage stage) {
  return layout(shape, micro_batch, tp, sequence_parallel, recompute, compute, stage, nullptr, nullptr);
}

// As model::Gpt2::layout: activations in the compute dtype, statistics in f32; what the Recompute mode
// rebuilds in backward is one working set shared by every block. Under kFull each block keeps only
// its output res3 (the next block's input), which under SP is this rank's rows. A pipeline stage
// carves its own blocks only, the token rows on the first stage, the head's on the last.
std::size_t Gpt2Tp::layout(const model::GptShape& s, int B, int tp, bool sp, model::Recompute r, DType compute,
                           model::Stage stage, std::byte* base, Acts* acts) {
  Acts scratch;
  Acts& a = acts ? *acts : scratch;
  model::Carver c{base, compute};
  const std::int64_t T = s.seq_len, C = s.n_embd, N = std::int64_t{B} * T, Cr = C / tp, R = sp ? N / tp : N;
  const std::int64_t Vs = model::vocab_shard_rows(s, tp);
  const bool full = r == model::Recompute::kFull, selective = r != model::Recompute::kNone;
  Layer work;
  if (stage.has_embedding()) a.rows = c.take_as(DType::kI32, {B, T});
  a.encoded = c.take({R, C});
  a.layers.resize(static_cast<std::size_t>(stage.end(s.n_layer) - stage.first_block));
  for (Layer& l : a.layers) {
    l.ln1 = c.per_block(full, work.ln1, {R, C});
    l.ln1_mean = c.per_block(full, work.ln1_mean, {R}, true), l.ln1_rstd = c.per_block(full, work.ln1_rstd, {R}, true);
    l.qkv = c.per_block(full, work.qkv, {B, T, 3 * Cr});
    l.atty = c.per_block(selective, work.atty, {B, T, Cr});
    l.lse = c.per_block(full, work.lse, {B, s.n_head / tp, T}, true);
    l.res2 = c.per_block(full, work.res2, {R, C});
    l.ln2 = c.per_block(full, work.ln2, {R, C});
    l.ln2_mean = c.per_block(full, work.ln2_mean, {R}, true), l.ln2_rstd = c.per_block(full, work.ln2_rstd, {R}, true);
    l.fch = c.per_block(full, work.fch, {B, T, 4 * Cr});
    l.fch_gelu = c.per_block(selective, work.fch_gelu, {B, T, 4 * Cr});
    l.res3 = c.take({R, C});  // block outputs are always kept: the next block's input
  }
  if (stage.has_head(s.n_layer)) {
    a.lnf = c.take({R, C}), a.lnf_mean = c.stat({R}), a.lnf_rstd = c.stat({R});
    a.logits = c.take({B, T, Vs});
  }
  a.proj = c.take({R, C}), a.dres = c.take({R, C}), a.dtmp = c.take({R, C}), a.dln = c.take({R, C});
  a.datty = c.take({B, T, Cr}), a.dbig = c.take({B, T, 4 * Cr});
  if (sp) a.full = c.take({N, C}), a.dfull = c.take({N, C});
  a.dnorm = c.stat({2 * C});
  return c.used;
}

Tensor Gpt2Tp::input_of(const Tensor& mine) {
  if (!sp_) return mine;
  gather_rows(ctx_, mine, a_.full);
  return a_.full;
}

Tensor Gpt2Tp::btc(Tensor t) const { return Tensor(t.data, t.dtype, {B_, s_.seq_len, t.dim(-1)}); }

// Under SP each rank's norm sees its rows only, so its weight and bias gradients are partial: they are
// computed into scratch, summed over the group, then added (+=) to the micro-batches' gradients. A
// frozen norm (empty dweight: LoRA's base) writes them to the scratch and drops them, with no collective.
void Gpt2Tp::norm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                           const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  if (!sp_ && !dweight.empty()) return be_.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd);
  const std::int64_t C = s_.n_embd;
  const Tensor dw(a_.dnorm.data, DType::kF32, {C}), db(static_cast<float*>(a_.dnorm.data) + C, DType::kF32, {C});
  be_.fill_zero(a_.dnorm);
  be_.layernorm_backward(dinp, dw, db, dout, inp, weight, mean, rstd);
  if (dweight.empty()) return;
  all_reduce_sum(ctx_, a_.dnorm);
  be_.accumulate(dweight, dw);
  be_.accumulate(dbias, db);
}

Tensor Gpt2Tp::param(const Tensor& unit, int u, int k) const {
  return model::param_view(table_, unit, table_.first_param(u) + k);
}

Tensor Gpt2Tp::grad(const Tensor& g, int u, int k) const { return g.empty() ? Tensor() : param(g, u, k); }

void Gpt2Tp::set_lora(model::Lora* lora) {
  lora_ = lora;
  if (lora_) connect_lora(*lora_, ctx_, "Gpt2Tp");
}

Tensor Gpt2Tp::head(const Tensor& unit) const {
  Tensor t = param(unit, 0, kWte);
  t.shape[0] = Vs_;
  return t;
}

// As model::Gpt2::block_forward, with qkv and fch column-parallel (this rank's heads and MLP units)
// and both projections row-parallel (summed over the group, bias once). LoRA's adapters read the
// column-parallel layers' whole input (`full` under SP) and join the row-parallel ones' partial sums.
void Gpt2Tp::block_forward(int l, const Tensor& w) {
  using model::BlockMatmul;
  const int u = 1 + l;
  Layer& L = layer(l);
  const Tensor x = block_input(l);
  be_.layernorm_forward(L.ln1, L.ln1_mean, L.ln1_rstd, x, param(w, u, kLn1W), param(w, u, kLn1B));
  column_parallel_forward(ctx_, L.qkv, L.ln1, sp_ ? a_.full : L.ln1, param(w, u, kAttnW), param(w, u, kAttnB), WeightLayout::kInOut);
  if (lora_) lora_->forward(BlockMatmul::kQkv, sp_ ? a_.full : L.ln1, L.qkv);
  be_.attention_forward(L.atty, L.lse, L.qkv, s_.n_head / tp_, segments_.tensor());
  row_parallel_forward(ctx_, a_.proj, sp_ ? a_.full : a_.proj, L.atty, param(w, u, kAttnProjW), param(w, u, kAttnProjB),
                       WeightLayout::kInOut, lora_forward_hook(lora_, BlockMatmul::kAttnOut, L.atty));
  be_.add(L.res2, x, a_.proj);
  be_.layernorm_forward(L.ln2, L.ln2_mean, L.ln2_rstd, L.res2, param(w, u, kLn2W), param(w, u, kLn2B));
  column_parallel_forward(ctx_, L.fch, L.ln2, sp_ ? a_.full : L.ln2, param(w, u, kFcW), param(w, u, kFcB), WeightLayout::kInOut);
  if (lora_) lora_->forward(BlockMatmul::kMlpUp, sp_ ? a_.full : L.ln2, L.fch);
  be_.gelu_forward(L.fch_gelu, L.fch);
  row_parallel_forward(ctx_, a_.proj, sp_ ? a_.full : a_.proj, L.fch_gelu, param(w, u, kFcProjW), param(w, u, kFcProjB),
                       WeightLayout::kInOut, lora_forward_hook(lora_, BlockMatmul::kMlpDown, L.fch_gelu));
  be_.add(L.res3, L.res2, a_.proj);
}

// A pipeline stage runs its part (as model::Gpt2): the embedding on the first (else its input is in
// a_.encoded, this rank's rows of the previous stage's output), its blocks, the head on the last.
void Gpt2Tp::run_forward(const std::int32_t* tokens, model::ParamSource& params) {
  const int last = s_.n_layer + 1;
  if (embeds_) {
    Tensor emb = params.unit(0);
    vocab_parallel_embed_tokens(ctx_, sp_ ? a_.encoded : btc(a_.encoded), btc(sp_ ? a_.full : a_.encoded), tokens,
                                s_.vocab_size, a_.rows, param(emb, 0, kWte), param(emb, 0, kWpe));
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
  be_.layernorm_forward(a_.lnf, a_.lnf_mean, a_.lnf_rstd, a_.layers.back().res3, param(fin, last, kLnfW),
                        param(fin, last, kLnfB));
  params.release(last);
  const Tensor emb = params.unit(0);  // the tied LM head, column-parallel over this rank's vocabulary rows
  column_parallel_forward(ctx_, a_.logits, a_.lnf, sp_ ? a_.full : a_.lnf, head(emb), Tensor(), WeightLayout::kOutIn);
  params.release(0);
}

double Gpt2Tp::forward(const std::int32_t* tokens, const std::int32_t* targets, model::ParamSource& params) {
  if (heads_)  // -1: outside the loss mask
    model::check_target_ids(targets, std::int64_t{B_} * s_.seq_len, s_.vocab_size);
  run_forward(tokens, params);
  double sum = 0.0;
  if (heads_)
    for (float x : ce_.forward(ctx_, a_.logits, targets, r_ * Vs_, s_.vocab_size)) sum += x;
  ready_for_backward_ = true;
  return sum;
}

std::vector<float> Gpt2Tp::forward_logits(const std::int32_t* tokens, model::ParamSource& params) {
  run_forward(tokens, params);
  ready_for_backward_ = false;
  return heads_ ? gather_logits(ctx_, a_.logits, s_.vocab_size) : std::vector<float>{};
}

// As model::Gpt2::block_backward; the column-parallel layers' input gradients are summed over the group.
// LoRA: a row-parallel layer's adapter reads the whole dout (gathered into dfull under SP) and adds to
// this rank's dinp; a column-parallel one's input gradient joins the layer's before the group's sum.
void Gpt2Tp::block_backward(int l, const Tensor& w, const Tensor& g) {
  using model::BlockMatmul;
  const int u = 1 + l;
  Layer& L = layer(l);
  const Tensor x = block_input(l);
  const Tensor dfch = a_.dbig;
  const Tensor dqkv(a_.dbig.data, dtype_, {B_, s_.seq_len, 3 * std::int64_t{s_.n_embd} / tp_});
  const Tensor dout = sp_ ? a_.dfull : a_.dres;  // a row-parallel layer's whole dout, once it ran
  row_parallel_backward(ctx_, dfch, a_.dfull, grad(g, u, kFcProjW), grad(g, u, kFcProjB), a_.dres, L.fch_gelu,
                        param(w, u, kFcProjW), WeightLayout::kInOut);
  if (lora_) lora_->backward(BlockMatmul::kMlpDown, L.fch_gelu, dout, dfch);
  be_.gelu_backward(dfch, L.fch, dfch);
  const Tensor ln2 = input_of(L.ln2);
  column_parallel_backward(ctx_, a_.dln, a_.dfull, grad(g, u, kFcW), grad(g, u, kFcB), dfch, ln2, param(w, u, kFcW),
                           WeightLayout::kInOut, lora_backward_hook(lora_, BlockMatmul::kMlpUp, ln2, dfch));
  norm_backward(a_.dtmp, grad(g, u, kLn2W), grad(g, u, kLn2B), a_.dln, L.res2, param(w, u, kLn2W), L.ln2_mean,
                L.ln2_rstd);
  be_.accumulate(a_.dres, a_.dtmp);
  row_parallel_backward(ctx_, a_.datty, a_.dfull, grad(g, u, kAttnProjW), grad(g, u, kAttnProjB), a_.dres, L.atty,
                        param(w, u, kAttnProjW), WeightLayout::kInOut);
  if (lora_) lora_->backward(BlockMatmul::kAttnOut, L.atty, dout, a_.datty);
  be_.attention_backward(dqkv, a_.datty, L.qkv, L.atty, L.lse, s_.n_head / tp_, segments_.tensor());
  const Tensor ln1 = input_of(L.ln1);
  column_parallel_backward(ctx_, a_.dln, a_.dfull, grad(g, u, kAttnW), grad(g, u, kAttnB), dqkv, ln1, param(w, u, kAttnW),
                           WeightLayout::kInOut, lora_backward_hook(lora_, BlockMatmul::kQkv, ln1, dqkv));
  norm_backward(a_.dtmp, grad(g, u, kLn1W), grad(g, u, kLn1B), a_.dln, x, param(w, u, kLn1W), L.ln1_mean, L.ln1_rstd);
  be_.accumulate(a_.dres, a_.dtmp);
}

// What block l's backward reads and the mode did not keep, as model::Gpt2::recompute_block. Full: the
// whole block forward again, its collectives included (the same sums of the same values: res3 comes
// out bit-identical to the kept one). Selective: attention from the kept qkv (this rank's heads, no
// communication) and GELU of the kept fc pre-activation.
void Gpt2Tp::recompute_block(int l, const Tensor& w) {
  if (recompute_ == model::Recompute::kFull) return block_forward(l, w);
  if (recompute_ == model::Recompute::kSelective) {
    Layer& L = layer(l);
    be_.attention_forward(L.atty, L.lse, L.qkv, s_.n_head / tp_, segments_.tensor());
    be_.gelu_forward(L.fch_gelu, L.fch);
  }
}

// A stage without the head starts from d(its output) in a_.dres (stage_output_grad); a stage without
// the embedding leaves d(its input) there (stage_input_grad), as model::Gpt2.
void Gpt2Tp::backward(model::ParamSource& params, model::GradSink& grads, float dloss) {
  ZT_CHECK(ready_for_backward_, "Gpt2Tp::backward needs a forward() with targets first (and runs once per forward)");
  ready_for_backward_ = false;
  const int last = s_.n_layer + 1;
  Tensor w, g;
  if (heads_) {
    ce_.backward(ctx_, a_.logits, a_.logits, dloss);  // dlogits in place
    w = params.unit(0), g = grads.unit(0);
    column_parallel_backward(ctx_, a_.dln, a_.dfull, g.empty() ? Tensor() : head(g), Tensor(), a_.logits,
                             input_of(a_.lnf), head(w), WeightLayout::kOutIn);
    params.release(0);
    if (!embeds_) grads.unit_done(0);  // the last stage's copy of wte's shard: final for this pass
    w = params.unit(last), g = grads.unit(last);
    norm_backward(a_.dres, grad(g, last, kLnfW), grad(g, last, kLnfB), a_.dln, a_.layers.back().res3,
                  param(w, last, kLnfW), a_.lnf_mean, a_.lnf_rstd);
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
  if (!g.empty())  // a frozen embedding (LoRA's base) needs no gradient
    vocab_parallel_embedding_backward(ctx_, param(g, 0, kWte), param(g, 0, kWpe), sp_ ? a_.dres : btc(a_.dres),
                                      sp_ ? btc(a_.dfull) : Tensor(), a_.rows);
  grads.unit_done(0);
}

}  // namespace zt::tp
