// The shared decoder (decoder.hpp): the ends, the block loops and the arena, once for every family.
#include "model/decoder.hpp"

#include "core/error.hpp"
#include "model/family.hpp"
#include "model/kv_cache.hpp"
#include "model/tp_split.hpp"

namespace zt::model {

using backend::Tensor;
using backend::WeightLayout;

Geometry Geometry::of(const GptShape& shape, const ModelOptions& o, int tp) {
  Geometry g;
  g.s = shape;
  g.B = o.micro_batch, g.tp = tp;
  g.generation = o.generation;
  g.T = o.generation ? o.tokens_per_row : shape.seq_len, g.N = std::int64_t{g.B} * g.T;
  g.sp = o.sequence_parallel && tp > 1;
  g.R = g.sp ? g.N / tp : g.N;
  g.dtype = o.compute, g.recompute = o.recompute;
  g.first = o.stage.first_block, g.end = o.stage.end(shape.n_layer);
  g.embeds = o.stage.has_embedding(), g.has_head = o.stage.has_head(shape.n_layer);
  g.value_head = shape.value_head;
  g.vocab_rows = tp == 1 ? shape.padded_vocab : vocab_shard_rows(shape, tp);
  g.loss_chunk = layers::loss_chunk_columns(g.vocab_rows, o.loss_chunk);
  return g;
}

void TokenIndex::set(backend::Backend& be, const std::int32_t* values, int B, std::int64_t T) {
  on_ = values != nullptr;
  if (!on_) return;
  const std::size_t bytes = static_cast<std::size_t>(B) * static_cast<std::size_t>(T) * sizeof(std::int32_t);
  if (buffer_.bytes() != bytes) {
    buffer_ = be.allocate(bytes);
    view_ = buffer_.view(DType::kI32, {B, T});
  }
  be.copy_from_host(buffer_.data(), values, bytes);
}

void Decoder::set_positions(const std::int32_t* positions) {
  for (std::int64_t n = 0; positions && n < g_.N; ++n)
    ZT_CHECK(positions[n] >= -1 && positions[n] < g_.s.seq_len, "model: position ", positions[n], " of token ", n,
             " outside [-1, ", g_.s.seq_len, ")");
  env_.sequence_positions.set(be_, positions, g_.B, g_.T);
}

DecoderEnv::DecoderEnv(backend::Backend& backend, const ParamTable& t, const Geometry& geometry,
                       const ModelOptions& options, layers::NormKind norm_kind)
    : be(backend), ctx{backend, options.tp_group, geometry.sp}, table(t), g(geometry),
      norm(ctx, norm_kind, static_cast<float>(geometry.s.norm_eps), geometry.s.n_embd) {}

Tensor DecoderEnv::param(const Tensor& unit, int u, int k) const {
  return param_view(table, unit, table.first_param(u) + static_cast<std::size_t>(k));
}

Tensor DecoderEnv::grad(const Tensor& grads, int u, int k) const { return grads.empty() ? Tensor() : param(grads, u, k); }

Tensor DecoderEnv::fused(const Tensor& unit, int u, int k, std::int64_t rows, std::int64_t cols) const {
  return unit.empty() ? Tensor() : Tensor(param(unit, u, k).data, unit.dtype, {rows, cols});
}

Tensor DecoderEnv::gathered(const Tensor& mine) {
  if (!g.sp) return mine;
  layers::gather_rows(ctx, mine, full);
  return full;
}

void DecoderEnv::rope(const Tensor& qkv, const Tensor& inv_freq, int n_rot_heads) const {
  be.rope_forward(qkv, inv_freq, n_rot_heads, token_positions());
}

void DecoderEnv::rope_backward(const Tensor& dqkv, const Tensor& inv_freq, int n_rot_heads) const {
  be.rope_backward(dqkv, inv_freq, n_rot_heads, token_positions());
}

void DecoderEnv::attention(int l, const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head) const {
  if (cache) be.attention_cached_forward(out, qkv, cache->keys(l), cache->values(l), slots, positions, n_head);
  else be.attention_forward(out, lse, qkv, n_head, segments.tensor());
}

layers::BeforeReduce DecoderEnv::lora_forward(BlockMatmul m, const Tensor& x) const {
  if (!lora) return {};
  return [l = lora, m, x](const Tensor& partial) { l->forward(m, x, partial); };
}

layers::BeforeReduce DecoderEnv::lora_backward(BlockMatmul m, const Tensor& x, const Tensor& dy) const {
  if (!lora) return {};
  return [l = lora, m, x, dy](const Tensor& dx) { l->backward(m, x, dy, dx); };
}

Decoder::Decoder(backend::Backend& backend, const ParamTable& table, const ModelOptions& options)
    : be_(backend), table_(table), g_(Geometry::of(table.shape(), options, options.tp())),
      norm_kind_(family_of(table.shape().arch).norm), positions_(family_of(table.shape().arch).learned_positions),
      env_(backend, table, g_, options, norm_kind_), block_(family_of(table.shape().arch).make_block(g_)),
      loss_(backend, g_.loss_chunk) {
  const GptShape& s = g_.s;
  ZT_CHECK_GT(g_.B, 0, "model: micro_batch must be positive");
  ZT_CHECK(g_.dtype == DType::kF32 || g_.dtype == DType::kBF16 || g_.dtype == DType::kF16,
           "model: compute dtype must be f32, bf16 or f16, not ", dtype_name(g_.dtype));
  ZT_CHECK(g_.first >= 0 && g_.first < g_.end && g_.end <= s.n_layer, "model: stage blocks [", g_.first, ", ", g_.end,
           ") outside the model's ", s.n_layer);
  ZT_CHECK(!g_.sp || g_.N % g_.tp == 0, "model: sequence parallelism needs tp to divide B*T");
  if (g_.generation)
    ZT_CHECK(g_.T > 0 && !g_.sp && g_.embeds && g_.has_head && g_.full_recompute(),
             "model: generation runs rows of tokens_per_row > 0 tokens (got ", g_.T,
             ") on the whole model, without sequence parallelism, with recompute=full's one working set");
  ZT_CHECK(!g_.value_head || !g_.generation, "model: a value head (a critic) does not generate");
  if (g_.tp > 1) check_tp_degree(s, g_.tp);
  if (g_.embeds || (g_.has_head && !g_.value_head)) {  // the vocabulary table it reads: the head's rows (+ the zero row under TP)
    const std::size_t vocab_table = g_.embeds ? table.first_param(0) : table.first_param(head_unit()) + head_param();
    const std::int64_t rows = table.params()[vocab_table].shape[0];
    ZT_CHECK_EQ(rows, g_.vocab_rows + (g_.tp > 1 ? 1 : 0), "model: the table is not tp_local_table(global, ", g_.tp,
                ") of this model");
  }
  backend::Carver count{nullptr, g_.dtype};
  DecoderTensors counted;
  carve(count, g_, norm_kind_, *block_, counted);
  arena_ = be_.allocate(count.used);
  backend::Carver c{static_cast<std::byte*>(arena_.data()), g_.dtype};
  carve(c, g_, norm_kind_, *block_, t_);
  env_.proj = t_.proj, env_.dres = t_.dres, env_.dln = t_.dln, env_.full = t_.full, env_.dfull = t_.dfull;
  env_.norm.set_scratch(t_.norm);
  block_->bind(env_);
  if (g_.has_head && !g_.generation && !g_.value_head) loss_.reserve(g_.N, s.n_embd, g_.vocab_rows, g_.dtype);
  if (g_.tp > 1) {
    dist::Communicator* group = options.tp_group;
    row_reduce_ = {[group](std::span<double> v) { group->all_reduce_values(v, dist::ReduceOp::kMax); },
                   [group](std::span<double> v) { group->all_reduce_values(v, dist::ReduceOp::kSum); }};
  }
}

std::size_t Decoder::activation_bytes(const GptShape& shape, const ModelOptions& options, int tp) {
  const Geometry g = Geometry::of(shape, options, tp);
  const Family& f = family_of(shape.arch);
  const std::unique_ptr<Block> blocks = f.make_block(g);
  backend::Carver count{nullptr, g.dtype};
  DecoderTensors counted;
  carve(count, g, f.norm, *blocks, counted);
  const bool lm_loss = g.has_head && !g.generation && !g.value_head;
  const std::size_t loss = lm_loss ? layers::ChunkedLmLoss::bytes(g.N, shape.n_embd, g.vocab_rows, g.loss_chunk, g.dtype) : 0;
  return count.used + loss;
}

void Decoder::carve(backend::Carver& c, const Geometry& g, layers::NormKind norm, Block& blocks, DecoderTensors& t) {
  const std::int64_t C = g.s.n_embd;
  if (g.embeds) t.ids = c.take_as(DType::kI32, {g.B, g.T});
  if (g.generation) t.slots = c.take_as(DType::kI32, {g.B}), t.positions = c.take_as(DType::kI32, {g.B, g.T});
  t.encoded = c.take({g.R, C});
  blocks.carve(c);
  if (g.has_head) {
    t.lnf = c.take({g.R, C});
    layers::NormStats unused;
    t.lnf_stats = layers::Norm::carve_stats(c, norm, g.R, false, unused);
    if (g.value_head)
      t.values = c.take({g.N, 1}), t.dvalues = c.take({g.N, 1}), t.values_f32 = c.take_as(DType::kF32, {g.N});
  }
  t.proj = c.take({g.R, C}), t.dres = c.take({g.R, C}), t.dln = c.take({g.R, C});
  if (g.sp) t.full = c.take({g.N, C}), t.dfull = c.take({g.N, C});
  t.norm = layers::Norm::carve_scratch(c, C);
}

namespace {
// Per-row weights of the loss to the backend. Every rank of a TP group holds the whole [N] (the loss
// reads every row, gathered under SP).
void set_row_weights(backend::Backend& be, backend::Buffer& buffer, const float* weights, std::int64_t rows) {
  if (weights == nullptr) return buffer.reset();
  const std::size_t bytes = static_cast<std::size_t>(rows) * sizeof(float);
  if (buffer.bytes() != bytes) buffer = be.allocate(bytes);
  be.copy_from_host(buffer.data(), weights, bytes);
}
}  // namespace

void Decoder::set_loss_weights(const float* weights) { set_row_weights(be_, loss_weights_, weights, g_.N); }

void Decoder::set_entropy(bool on) {
  ZT_CHECK(!on || (!g_.value_head && !g_.generation), "model: only a language model's training forward has entropies");
  entropy_ = on;
}

void Decoder::set_entropy_weights(const float* weights) { set_row_weights(be_, entropy_weights_, weights, g_.N); }

void Decoder::set_logit_temperature(float t) {
  ZT_CHECK(t > 0 && (t == 1 || (!g_.value_head && !g_.generation)), "model: logit temperature ", t,
           " (positive; a language model's training forward only)");
  logit_scale_ = 1.0f / t;
}

void Decoder::set_lora(Lora* lora) {
  env_.lora = lora;
  if (!lora) return;
  ZT_CHECK(lora->tp() == g_.tp, "model: adapters cut for tp=", lora->tp(), " on a group of ", g_.tp);
  if (g_.tp > 1) lora->set_group_sum([this](const Tensor& t) { layers::all_reduce_sum(env_.ctx, t); });
}

int Decoder::head_unit() const { return g_.s.tie_embeddings ? 0 : g_.s.n_layer + 1; }

// Tied: the token embedding (param 0 of unit 0); untied (a value head too): after the final norm's
// parameters in unit L+1.
int Decoder::head_param() const {
  return g_.s.tie_embeddings ? 0 : (norm_kind_ == layers::NormKind::kLayerNorm ? 2 : 1);
}

Tensor Decoder::head(const Tensor& unit) const {
  Tensor t = env_.param(unit, head_unit(), head_param());
  if (!g_.value_head) t.shape[0] = g_.vocab_rows;  // without TP's zero row
  return t;
}

Tensor Decoder::final_norm(const Tensor& unit, int k) const {
  if (k == 1 && norm_kind_ == layers::NormKind::kRmsNorm) return Tensor();  // RMSNorm has no bias
  if (unit.empty()) return Tensor();
  const int last = g_.s.n_layer + 1;
  if (static_cast<std::size_t>(unit.numel()) == table_.units()[last].numel) return env_.param(unit, last, k);
  return param_view_in_piece(table_, unit, table_.first_param(last) + static_cast<std::size_t>(k));
}

void Decoder::embed(const std::int32_t* tokens, ParamSource& params) {
  if (params.pieces(0) > 1) return embed_in_pieces(tokens, params);
  const Tensor emb = params.unit(0);
  const Tensor wpe = positions_ ? env_.param(emb, 0, 1) : Tensor();
  layers::embed_tokens(env_.ctx, t_.encoded, env_.whole(t_.encoded), tokens, g_.s.vocab_size, t_.ids, env_.param(emb, 0, 0),
                       wpe, env_.token_positions());
  params.release(0);
}

// The final norm, then the LM head over this rank's vocabulary rows (tied: unit 0 again): its loss, or
// (without targets) its logits.
void Decoder::head_forward(ParamSource& params, const std::int32_t* targets) {
  const int last = g_.s.n_layer + 1;
  if (targets && head_in_pieces(params)) return pieced_head_forward(params, targets);
  Tensor fin = params.unit(last);
  env_.norm.forward(t_.lnf, t_.lnf_stats, block_->output(g_.end - 1), final_norm(fin, 0), final_norm(fin, 1));
  if (g_.s.tie_embeddings) {
    params.release(last);
    fin = params.unit(0);
  }
  if (g_.value_head) value_forward(head(fin));
  else if (targets) {
    layers::WholeHead whole(head(fin), Tensor());
    loss_forward(whole, targets);
  } else {
    logits_forward(head(fin));
  }
  params.release(head_unit());
}

// values = lnf w^T, every row on every rank of a TP group (the head is replicated; gathered under SP),
// rounded to X as any matmul's output, then to the host as f32.
void Decoder::value_forward(const Tensor& head_weight) {
  be_.matmul_forward(t_.values, env_.gathered(t_.lnf), head_weight, Tensor(), WeightLayout::kOutIn);
  be_.cast(t_.values_f32, t_.values);
  token_losses_.resize(static_cast<std::size_t>(g_.N));
  be_.copy_to_host(token_losses_.data(), t_.values_f32.data, t_.values_f32.bytes());
  loss_sum_ = 0.0;
  for (float v : token_losses_) loss_sum_ += v;
}

// dv = dloss * w (in X), then dW += dv^T lnf over every row and d(lnf) = dv w for this rank's rows: the
// head and its inputs are replicated over a TP group, so no sum over the group (each rank computes the
// whole, as it does the final norm's parameters without SP).
void Decoder::value_backward(const Tensor& head_weight, const Tensor& head_grad, float dloss) {
  ZT_CHECK(loss_weights_.bytes() > 0, "model: a value head's backward needs set_loss_weights (d(loss)/d(value) per token)");
  be_.cast(t_.dvalues, loss_weights_.view(DType::kF32, {g_.N, 1}));
  be_.scale(t_.dvalues, dloss);
  if (!g_.sp) return be_.matmul_backward(env_.dln, head_grad, Tensor(), t_.dvalues, t_.lnf, head_weight, WeightLayout::kOutIn);
  be_.matmul_backward(Tensor(), head_grad, Tensor(), t_.dvalues, env_.full, head_weight, WeightLayout::kOutIn);
  const std::size_t first = static_cast<std::size_t>(env_.ctx.rank() * g_.R) * dtype_size(g_.dtype);
  const Tensor mine(static_cast<std::byte*>(t_.dvalues.data) + first, g_.dtype, {g_.R, 1});
  be_.matmul_backward(env_.dln, Tensor(), Tensor(), mine, t_.lnf, head_weight, WeightLayout::kOutIn);
}

// The per-row losses over this rank's vocabulary rows, combined over the TP group (every rank's sum is
// the same), added on the host in row order. Under SP the head reads every row: lnf gathered.
void Decoder::loss_forward(layers::HeadRows& head, const std::int32_t* targets) {
  const std::int64_t lo = g_.tp > 1 ? env_.ctx.rank() * g_.vocab_rows : 0;  // this rank's first vocabulary id
  // logits / t = (lnf / t) w^T: the head's input scaled (kept so, as the backward's d(weight) needs it).
  if (logit_scale_ != 1.0f) be_.scale(t_.lnf, logit_scale_);
  token_losses_ = loss_.forward(env_.gathered(t_.lnf), head, g_.vocab_rows, targets, lo, g_.s.vocab_size,
                                g_.tp > 1 ? &row_reduce_ : nullptr, entropy_);
  loss_sum_ = 0.0;
  for (float x : token_losses_) loss_sum_ += x;
}

// The logits on the host (sampling and tests), through a buffer of their own (no training step holds it;
// kept for the next call, grown when it needs more), gathered from the group: every row ([N, vocab_rows] on this rank), or only logit_rows_ (the next
// tokens' when sampling): those rows of the final norm's output, gathered first under SP since every
// rank needs them, through this rank's vocabulary rows as a plain column-parallel matmul of those rows.
void Decoder::logits_forward(const Tensor& head_weight) {
  layers::TpContext ctx = env_.ctx;
  Tensor x = t_.lnf, full = env_.whole(t_.lnf);
  backend::Buffer packed;
  if (!logit_rows_.empty()) {
    x = full = pick_rows(env_.gathered(t_.lnf), logit_rows_, packed);
    ctx.sequence_parallel = false;  // the rows are whole on every rank
  }
  const std::int64_t rows = logit_rows_.empty() ? g_.N : x.dim(0);  // every row: all N, gathered under SP
  const std::size_t bytes = static_cast<std::size_t>(rows * g_.vocab_rows) * dtype_size(g_.dtype);
  if (logits_buffer_.bytes() < bytes) logits_buffer_ = be_.allocate(bytes);  // kept: a decoding step per token
  const Tensor logits = logits_buffer_.view(g_.dtype, {rows, g_.vocab_rows});
  layers::column_parallel_forward(ctx, logits, x, full, head_weight, Tensor(), WeightLayout::kOutIn);
  host_logits_ = layers::host_logits(ctx, logits, g_.s.vocab_size);
}

Tensor Decoder::pick_rows(const Tensor& x, const std::vector<std::int64_t>& rows, backend::Buffer& packed) {
  const std::int64_t C = x.dim(-1), k = static_cast<std::int64_t>(rows.size());
  const std::size_t row_bytes = static_cast<std::size_t>(C) * dtype_size(x.dtype);
  bool consecutive = true;
  for (std::int64_t i = 0; i < k; ++i) {
    ZT_CHECK(rows[i] >= 0 && rows[i] < g_.N, "model: logits row ", rows[i], " outside the micro-batch's ", g_.N, " rows");
    consecutive = consecutive && rows[i] == rows[0] + i;
  }
  if (consecutive) return Tensor(static_cast<std::byte*>(x.data) + rows[0] * row_bytes, x.dtype, {k, C});
  packed = be_.allocate(static_cast<std::size_t>(k) * row_bytes);
  for (std::int64_t i = 0; i < k; ++i)
    be_.copy(static_cast<std::byte*>(packed.data()) + i * row_bytes, static_cast<std::byte*>(x.data) + rows[i] * row_bytes,
             row_bytes);
  return packed.view(x.dtype, {k, C});
}

// A pipeline stage runs its part: the embedding on the first (else its input is in t_.encoded, the
// previous stage's output), its blocks, and the final norm and head on the last.
void Decoder::run_forward(const std::int32_t* tokens, const std::int32_t* targets, ParamSource& params, bool head) {
  if (g_.embeds) embed(tokens, params);
  for (int l = g_.first; l < g_.end; ++l) {
    if (env_.lora) env_.lora->begin_block(l, false);
    block_->forward(env_, l, block_input(l), params.unit(1 + l));
    params.release(1 + l);
    if (env_.lora) env_.lora->end_block(l, false);
  }
  if (g_.has_head && head) head_forward(params, targets);
}

double Decoder::forward(const std::int32_t* tokens, const std::int32_t* targets, ParamSource& params) {
  if (g_.has_head && !g_.value_head) layers::check_target_ids(targets, g_.N, g_.s.vocab_size);
  run_forward(tokens, targets, params);
  ready_for_backward_ = true;
  return g_.has_head ? loss_sum_ : 0.0;
}

std::vector<float> Decoder::forward_logits(const std::int32_t* tokens, ParamSource& params) {
  ZT_CHECK(!g_.value_head, "model: a value head has no logits (forward() gives its values)");
  run_forward(tokens, nullptr, params);
  ready_for_backward_ = false;
  return g_.has_head ? std::move(host_logits_) : std::vector<float>{};
}

std::vector<float> Decoder::forward_row_logits(const std::int32_t* tokens, ParamSource& params, std::int64_t row) {
  ZT_CHECK(row >= 0 && row < g_.N, "model: logits row ", row, " outside the micro-batch's ", g_.N, " rows");
  logit_rows_ = {row};
  std::vector<float> logits = forward_logits(tokens, params);
  logit_rows_.clear();
  return logits;
}

// The batch's slots and positions to the backend, then the usual forward with the blocks' attention over
// the cache (DecoderEnv::attention) and the embedding and RoPE at the positions.
std::vector<float> Decoder::forward_cached(const CachedBatch& batch, KvCache& cache, ParamSource& params) {
  ZT_CHECK(g_.generation, "model: forward_cached needs a model made for generation (ModelOptions::generation)");
  be_.copy_from_host(t_.slots.data, batch.slots, t_.slots.bytes());
  be_.copy_from_host(t_.positions.data, batch.positions, t_.positions.bytes());
  env_.cache = &cache, env_.slots = t_.slots, env_.positions = t_.positions;
  logit_rows_ = batch.logit_rows;
  struct Reset {  // the training path again, whatever throws
    Decoder& d;
    ~Reset() { d.env_.cache = nullptr, d.logit_rows_.clear(); }
  } reset{*this};
  run_forward(batch.tokens, nullptr, params, !batch.logit_rows.empty());  // no rows asked: no head
  ready_for_backward_ = false;
  return batch.logit_rows.empty() ? std::vector<float>{} : std::move(host_logits_);
}

// d(lnf) from the loss over the head's rows, into env.dln (summed over the TP group; scattered under SP).
void Decoder::loss_backward(layers::HeadRows& head, float dloss) {
  const Tensor x = env_.gathered(t_.lnf);
  loss_.backward(g_.sp ? env_.dfull : env_.dln, x, head, dloss,
                 loss_weights_.bytes() ? loss_weights_.view(DType::kF32, {g_.N}) : Tensor(),
                 entropy_weights_.bytes() ? entropy_weights_.view(DType::kF32, {g_.N}) : Tensor());
  if (g_.sp) layers::reduce_scatter_rows(env_.ctx, env_.dfull, env_.dln);
  else layers::all_reduce_sum(env_.ctx, env_.dln);
  if (logit_scale_ != 1.0f) be_.scale(env_.dln, logit_scale_);  // d(lnf) = d(lnf / t) / t
}

// The loss with the LM head (tied: the token embedding's rows, a copy on a last stage without the
// embedding), then the final norm, leaving d(last block's output) in env.dres. The head is column-parallel
// over the vocabulary: each rank's share of d(lnf) is summed over the group (reduce-scattered under SP).
void Decoder::head_backward(ParamSource& params, GradSink& grads, float dloss) {
  if (head_in_pieces(params)) return pieced_head_backward(params, grads, dloss);
  const int last = g_.s.n_layer + 1;
  Tensor w, g;
  auto whole_loss_backward = [&] {
    layers::WholeHead whole(head(w), g.empty() ? Tensor() : head(g));
    loss_backward(whole, dloss);
  };
  if (g_.s.tie_embeddings) {
    w = params.unit(0);  // separate statements: the ParamSource sees p before g, always
    g = grads.unit(0);
    whole_loss_backward();
    params.release(0);
    if (!g_.embeds) grads.unit_done(0);  // the last stage's copy of the embedding: final for this pass
    else grads.unit_part_done(0);        // the embedding's own share comes at the end of the pass
  }
  w = params.unit(last);
  g = grads.unit(last);
  if (g_.value_head) value_backward(head(w), g.empty() ? Tensor() : head(g), dloss);
  else if (!g_.s.tie_embeddings) whole_loss_backward();
  env_.norm.backward(env_.dres, final_norm(g, 0), final_norm(g, 1), env_.dln, block_->output(g_.end - 1),
                     final_norm(w, 0), t_.lnf_stats);
  params.release(last);
  grads.unit_done(last);
}

// Full: the whole block forward again, its collectives included (the same sums of the same values: its
// output comes out bit-identical to the kept one). Selective: the family's cheap part.
void Decoder::recompute(int l, const Tensor& w) {
  if (g_.full_recompute()) return block_->forward(env_, l, block_input(l), w);
  if (!g_.keeps_all()) block_->recompute_selective(env_, l);
}

void Decoder::blocks_backward(ParamSource& params, GradSink& grads) {
  for (int l = g_.end - 1; l >= g_.first; --l) {
    const Tensor w = params.unit(1 + l);
    const Tensor g = grads.unit(1 + l);
    if (env_.lora) env_.lora->begin_block(l, true);
    recompute(l, w);
    block_->backward(env_, l, block_input(l), w, g);
    params.release(1 + l);
    grads.unit_done(1 + l);
    if (env_.lora) env_.lora->end_block(l, true);
  }
}

// A stage without the head starts from d(its output) in env.dres (stage_output_grad); a stage without
// the embedding leaves d(its input) there (stage_input_grad).
void Decoder::backward(ParamSource& params, GradSink& grads, float dloss) {
  ZT_CHECK(ready_for_backward_, "model: backward needs a forward() with targets first (and runs once per forward)");
  ready_for_backward_ = false;
  if (g_.has_head) head_backward(params, grads, dloss);
  blocks_backward(params, grads);
  if (!g_.embeds) return;
  if (const int pieces = params.pieces(0); pieces > 1) return embedding_backward_in_pieces(pieces, grads);
  const Tensor g = grads.unit(0);
  if (!g.empty())  // a frozen embedding (LoRA's base) needs no gradient
    layers::embed_tokens_backward(env_.ctx, env_.param(g, 0, 0), positions_ ? env_.param(g, 0, 1) : Tensor(), env_.dres,
                                  env_.dfull, t_.ids, env_.token_positions());
  grads.unit_done(0);
}

}  // namespace zt::model
