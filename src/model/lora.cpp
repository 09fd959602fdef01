// LoRA adapters inside the blocks (lora.hpp). Per targeted module, with s the scale:
//   forward   h = s (x A^T) [N,r];  y += h Bx^T
//   backward  dh = s (dy Bx) ;  dBx += dy^T h ;  dA += dh^T x ;  dx += dh A
// where Bx is B itself, or, for a module inside a fused matmul (Llama's q|k|v and gate|up), B placed at
// its output rows of a zeroed [out_total, r] matrix: one GEMM then adds exactly the module's columns, and
// the module's rows of dBx are B's gradient. h is recomputed in backward (r columns: cheap), so no
// activation is kept per block. With lora.dropout, x is the input after the site's counter-based mask
// in both passes, and dx goes back through the same mask. Under tensor parallelism each rank runs the
// same on its shard (lora.hpp), the replicated factor's partial gradients summed over the group per block.
#include "model/lora.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "backend/carver.hpp"
#include "model/family.hpp"

namespace zt::model {

using backend::Tensor;
using backend::WeightLayout;

std::vector<LoraModule> lora_modules(const GptShape& s) { return family_of(s.arch).lora_modules(s); }

bool column_parallel(BlockMatmul m) { return m == BlockMatmul::kQkv || m == BlockMatmul::kMlpUp; }

float LoraSpec::scale() const {
  const double r = static_cast<double>(rank);
  return static_cast<float>(rslora ? alpha / std::sqrt(r) : alpha / r);
}

namespace {
bool targeted(const LoraSpec& spec, const LoraModule& m) {
  return std::find(spec.targets.begin(), spec.targets.end(), m.name) != spec.targets.end();
}
std::string block_prefix(const GptShape& s, int l) { return "base_model.model." + family_of(s.arch).block_prefix(l); }
}  // namespace

ParamTable lora_table(const GptShape& shape, const LoraSpec& spec) {
  ZT_CHECK(spec.rank > 0, "lora_table: rank must be positive");
  std::vector<ParamInfo> params;
  auto add = [&](std::string name, std::vector<std::int64_t> dims, int unit) {
    ParamInfo p;
    p.name = std::move(name);
    p.shape = p.hf_shape = std::move(dims);
    p.unit = unit;
    p.decay = true;
    params.push_back(std::move(p));
  };
  for (int l = 0; l < shape.n_layer; ++l)
    for (const LoraModule& m : lora_modules(shape)) {
      if (!targeted(spec, m)) continue;
      add(block_prefix(shape, l) + m.path + ".lora_A.weight", {spec.rank, m.in}, l);
      add(block_prefix(shape, l) + m.path + ".lora_B.weight", {m.width, spec.rank}, l);
    }
  ZT_CHECK(!params.empty(), "lora_table: no module of this family is targeted");
  return ParamTable(shape, params);
}

void init_lora_range(const ParamTable& adapters, std::uint64_t seed, std::size_t first, std::size_t count, float* out) {
  ZT_CHECK_LE(first + count, adapters.numel(), "init_lora_range: range past the adapter buffer");
  for (const ParamInfo& p : adapters.params()) {
    const std::size_t begin = std::max(first, p.offset), end = std::min(first + count, p.offset + p.numel);
    if (begin >= end) continue;
    float* dst = out + (begin - first);
    if (p.name.ends_with(".lora_B.weight")) {
      std::fill(dst, dst + (end - begin), 0.0f);
      continue;
    }
    const double bound = 1.0 / std::sqrt(static_cast<double>(p.shape[1]));  // kaiming_uniform_(a=sqrt(5)): 1/sqrt(fan_in)
    const std::uint64_t purpose = rng::purpose_id("lora/" + p.name);
    for (std::size_t i = begin; i < end; ++i)
      dst[i - begin] = static_cast<float>((2 * rng::uniform(seed, purpose, i - p.offset) - 1) * bound);
  }
}

std::string lora_base_weight(const std::string& adapter_name) {
  const std::string prefix = "base_model.model.", suffix = ".lora_A.weight";
  ZT_CHECK(adapter_name.starts_with(prefix) && adapter_name.ends_with(suffix), "not a lora_A name: ", adapter_name);
  return adapter_name.substr(prefix.size(), adapter_name.size() - prefix.size() - suffix.size()) + ".weight";
}

void merge_lora(const ParamTable& base, float* base_flat, const ParamTable& adapters, const float* adapter_flat,
                double scale) {
  for (std::size_t i = 0; i + 1 < adapters.params().size(); i += 2) {
    const ParamInfo& w = base.find(lora_base_weight(adapters.params()[i].name));
    merge_lora_pair(base, adapters, i, adapter_flat, scale, {base_flat + w.offset, w.numel});
  }
}

std::vector<std::size_t> lora_pair_of(const ParamTable& base, const ParamTable& adapters) {
  std::vector<std::size_t> pair(base.params().size(), SIZE_MAX);
  for (std::size_t i = 0; i + 1 < adapters.params().size(); i += 2)
    pair.at(static_cast<std::size_t>(&base.find(lora_base_weight(adapters.params()[i].name)) - base.params().data())) = i;
  return pair;
}

void merge_lora_pair(const ParamTable& base, const ParamTable& adapters, std::size_t first, const float* adapter_flat,
                     double scale, std::span<float> W) {
  const bool conv1d = family_of(base.shape().arch).weights == WeightLayout::kInOut;  // GPT-2 stores [in, out]
  const ParamInfo &a = adapters.params()[first], &b = adapters.params()[first + 1];
  const std::int64_t r = a.shape[0], in = a.shape[1], out = b.shape[0];
  ZT_CHECK(W.size() == static_cast<std::size_t>(in * out) && b.shape[1] == r, "merge_lora: ", a.name, " does not fit ",
           lora_base_weight(a.name));
  const float* A = adapter_flat + a.offset;
  const float* B = adapter_flat + b.offset;
  for (std::int64_t o = 0; o < out; ++o)
    for (std::int64_t j = 0; j < in; ++j) {
      double d = 0;
      for (std::int64_t k = 0; k < r; ++k) d += static_cast<double>(B[o * r + k]) * A[k * in + j];
      float& target = conv1d ? W[j * out + o] : W[o * in + j];
      target = static_cast<float>(target + scale * d);
    }
}

std::string peft_adapter_config(const LoraSpec& spec, const GptShape& shape, const std::string& base_path) {
  const nlohmann::json j = {{"base_model_name_or_path", base_path},
                            {"bias", "none"},
                            {"fan_in_fan_out", family_of(shape.arch).weights == WeightLayout::kInOut},
                            {"inference_mode", true},
                            {"lora_alpha", spec.alpha},
                            {"lora_dropout", spec.dropout},
                            {"peft_type", "LORA"},
                            {"r", spec.rank},
                            {"target_modules", spec.targets},
                            {"task_type", "CAUSAL_LM"},
                            {"use_rslora", spec.rslora}};
  return j.dump(2) + "\n";
}

std::vector<LoraModule> Lora::local_modules(const GptShape& s, int tp) {
  std::vector<LoraModule> out = lora_modules(s);
  for (LoraModule& m : out) {
    if (column_parallel(m.matmul)) m.out_total /= tp, m.col /= tp, m.width /= tp;
    else m.in /= tp;
  }
  return out;
}

namespace {
// The replicated factor of a TP rank's module: lora_A [r, in] of a column-parallel one, lora_B [out, r]
// of a row-parallel one (elements).
std::int64_t replicated_numel(const LoraModule& m, int rank) {
  return column_parallel(m.matmul) ? rank * m.in : m.width * rank;
}
}  // namespace

// Sized for every module of the family (whichever are targeted), as this TP rank holds them.
std::size_t Lora::layout(const GptShape& s, int rank, int B, DType compute, int tp, std::byte* base, Scratch* out) {
  Scratch unused;
  Scratch& sc = out ? *out : unused;
  std::int64_t w_max = 0, in_max = 0, rep = 0;
  for (const LoraModule& m : local_modules(s, tp)) {
    w_max = std::max(w_max, m.out_total), in_max = std::max(in_max, m.in);
    rep += replicated_numel(m, rank);
  }
  const std::int64_t N = std::int64_t{B} * s.seq_len, r = rank;
  backend::Carver c{base, compute};
  sc.h = c.take({N, r}), sc.dh = c.take({N, r});
  sc.delta = c.take({N, w_max}), sc.dx = c.take({N, in_max});
  sc.e = c.take({w_max, r}), sc.de = c.stat({w_max, r});
  sc.xd = c.take({N, in_max});
  if (tp > 1) sc.rep = c.stat({rep});
  return c.used;
}

std::size_t Lora::scratch_bytes(const GptShape& shape, int rank, int micro_batch, DType compute, int tp) {
  return layout(shape, rank, micro_batch, compute, tp, nullptr, nullptr);
}

Lora::Lora(backend::Backend& backend, const ParamTable& adapters, const LoraSpec& spec, int micro_batch, DType compute,
           int tp, int tp_rank)
    : be_(backend), table_(adapters), rank_(spec.rank), tp_(tp), scale_(spec.scale()),
      dropout_(static_cast<float>(spec.dropout)), seed_(spec.seed), dtype_(compute),
      n_rows_(std::int64_t{micro_batch} * adapters.shape().seq_len) {
  const GptShape& s = adapters.shape();
  ZT_CHECK(tp >= 1 && tp_rank >= 0 && tp_rank < tp, "lora: TP rank ", tp_rank, " of ", tp);
  const std::vector<LoraModule> global = lora_modules(s), local = local_modules(s, tp);
  std::size_t param = 0;
  std::int64_t rep = 0;
  for (std::size_t i = 0; i < global.size(); ++i) {
    if (!targeted(spec, global[i])) continue;
    const LoraModule& m = local[i];
    const std::int64_t first_column = column_parallel(m.matmul) ? 0 : tp_rank * m.in;
    sites_.push_back({m, param, global[i].in, first_column, rep});
    param += 2;
    rep += replicated_numel(m, rank_);
  }
  // Every block's unit holds the same sites (a pipeline rank's table holds some blocks only).
  for (int u = 0; u < table_.n_units(); ++u) {
    const std::size_t n = table_.end_param(u) - table_.first_param(u);
    ZT_CHECK(n == 0 || n == param, "lora: adapter table: block ", u, " holds ", n, " adapter tensors, not ", param);
  }
  arena_ = be_.allocate(layout(s, rank_, micro_batch, dtype_, tp_, nullptr, nullptr));
  layout(s, rank_, micro_batch, dtype_, tp_, static_cast<std::byte*>(arena_.data()), &s_);
  if (tp_ > 1) s_.rep = Tensor(s_.rep.data, DType::kF32, {rep});  // the targeted modules' part, summed per block
}

bool Lora::adapts(BlockMatmul m) const {
  for (const Site& site : sites_)
    if (site.module.matmul == m) return true;
  return false;
}

void Lora::begin_block(int l, bool backward) {
  ZT_CHECK(params_ != nullptr && (!backward || grads_ != nullptr), "lora: adapters not bound");
  block_ = l;
  w_ = params_->unit(l);  // separate statements: the ParamSource sees p before g, always
  if (backward) g_ = grads_->unit(l);
  if (backward && tp_ > 1) be_.fill_zero(s_.rep);
}

// Before the unit is handed to the engine (its DP reduction): the replicated factors' gradients whole.
void Lora::end_block(int l, bool backward) {
  if (backward && tp_ > 1) sum_replicated_grads();
  params_->release(l);
  if (backward) grads_->unit_done(l);
  block_ = -1;
}

Tensor Lora::replicated_grad(const Site& site, std::size_t p, std::int64_t rows, std::int64_t cols) {
  if (tp_ == 1) return view(g_, p, rows, cols);
  return Tensor(static_cast<float*>(s_.rep.data) + site.rep_offset, DType::kF32, {rows, cols});
}

void Lora::sum_replicated_grads() {
  ZT_CHECK(static_cast<bool>(group_sum_), "lora: tp=", tp_, " but no group to sum the replicated gradients over");
  group_sum_(s_.rep);
  for (const Site& site : sites_) {
    const LoraModule& m = site.module;
    const bool column = column_parallel(m.matmul);
    const std::int64_t rows = column ? rank_ : m.width, cols = column ? m.in : rank_;
    be_.accumulate(view(g_, site.a_param + (column ? 0 : 1), rows, cols), replicated_grad(site, 0, rows, cols));
  }
}

Tensor Lora::view(const Tensor& unit, std::size_t p, std::int64_t rows, std::int64_t cols) const {
  const std::size_t index = table_.first_param(block_) + p;
  Tensor t = param_view(table_, unit, index);
  ZT_CHECK(t.rank == 2 && t.shape[0] == rows && t.shape[1] == cols, "lora: ", table_.params()[index].name, " shape");
  return t;
}

Tensor Lora::expanded_b(const Site& site, const Tensor& b) {
  const LoraModule& m = site.module;
  if (m.width == m.out_total) return b;
  const Tensor e(s_.e.data, dtype_, {m.out_total, rank_});
  be_.fill_zero(e);
  const std::size_t row_bytes = static_cast<std::size_t>(rank_) * dtype_size(dtype_);
  be_.copy(static_cast<std::byte*>(e.data) + m.col * row_bytes, b.data, b.bytes());
  return e;
}

// The mask of (layer, module): Philox stream from the adapter's name, counter = the element's global
// index (key + row) * in + column for each run of rows (set_dropout_rows), with the input's global width
// and column (a row-parallel rank's block of columns gets the whole input's mask: the same on any tp).
void Lora::drop(const Site& site, const Tensor& t) {
  const std::string& name = table_.params()[table_.first_param(block_) + site.a_param].name;
  const std::int64_t rows = t.dim(0), in = t.dim(1);
  for (const DropoutRows& run : dropout_rows_) {
    const std::int64_t count = run.count < 0 ? rows - run.first : run.count;
    ZT_CHECK(run.first >= 0 && run.first + count <= rows, "lora dropout: rows [", run.first, ", ", run.first + count,
             ") outside the input's ", rows);
    if (count == 0) continue;
    const Tensor part(static_cast<std::byte*>(t.data) + static_cast<std::size_t>(run.first * in) * dtype_size(t.dtype),
                      t.dtype, {count, in});
    be_.dropout(part, part, dropout_, seed_, rng::purpose_id("lora_dropout/" + name),
                run.key * static_cast<std::uint64_t>(site.in_global) + static_cast<std::uint64_t>(site.in_first),
                site.in_global);
  }
}

Tensor Lora::adapter_input(const Site& site, const Tensor& x) {
  if (!dropout_on_ || dropout_ == 0.0f) return x;
  const Tensor xd(s_.xd.data, dtype_, {x.numel() / site.module.in, site.module.in});
  be_.copy(xd.data, x.data, xd.bytes());
  drop(site, xd);
  return xd;
}

void Lora::forward(BlockMatmul matmul, const Tensor& x, const Tensor& y) {
  ZT_CHECK(block_ >= 0, "lora: forward outside begin_block/end_block");
  for (const Site& site : sites_) {
    const LoraModule& m = site.module;
    if (m.matmul != matmul) continue;
    const Tensor a = view(w_, site.a_param, rank_, m.in), b = view(w_, site.a_param + 1, m.width, rank_);
    // The input's rows: a training micro-batch's n_rows_, or fewer (generation's prefill and decoding
    // rows, through one Lora sized for the larger).
    const std::int64_t rows = x.numel() / m.in;
    ZT_CHECK(rows <= n_rows_ && rows * m.in == x.numel(), "lora: ", x.numel(), " inputs of width ", m.in, " past its ",
             n_rows_, " rows");
    const Tensor x2(x.data, x.dtype, {rows, m.in}), h(s_.h.data, dtype_, {rows, rank_});
    const Tensor delta(s_.delta.data, dtype_, {rows, m.out_total}), y2(y.data, y.dtype, {rows, m.out_total});
    be_.matmul_forward(h, adapter_input(site, x2), a, Tensor(), WeightLayout::kOutIn);
    be_.scale(h, scale_);
    be_.matmul_forward(delta, h, expanded_b(site, b), Tensor(), WeightLayout::kOutIn);
    be_.accumulate(y2, delta);
  }
}

void Lora::backward(BlockMatmul matmul, const Tensor& x, const Tensor& dy, const Tensor& dx) {
  ZT_CHECK(block_ >= 0 && g_.data != nullptr, "lora: backward outside begin_block/end_block");
  for (const Site& site : sites_) {
    const LoraModule& m = site.module;
    if (m.matmul != matmul) continue;
    const Tensor a = view(w_, site.a_param, rank_, m.in), b = view(w_, site.a_param + 1, m.width, rank_);
    const bool column = column_parallel(m.matmul);  // which factor is replicated under TP
    const Tensor da = column ? replicated_grad(site, site.a_param, rank_, m.in) : view(g_, site.a_param, rank_, m.in);
    const Tensor db = column ? view(g_, site.a_param + 1, m.width, rank_)
                             : replicated_grad(site, site.a_param + 1, m.width, rank_);
    const Tensor x2(x.data, x.dtype, {n_rows_, m.in}), dy2(dy.data, dy.dtype, {n_rows_, m.out_total});
    const Tensor h(s_.h.data, dtype_, {n_rows_, rank_}), dh(s_.dh.data, dtype_, {n_rows_, rank_});
    const Tensor xa = adapter_input(site, x2);  // the forward's dropped input again (same mask)
    be_.matmul_forward(h, xa, a, Tensor(), WeightLayout::kOutIn);
    be_.scale(h, scale_);
    if (m.width == m.out_total) {
      be_.matmul_backward(dh, db, Tensor(), dy2, h, b, WeightLayout::kOutIn);
    } else {  // the module's rows of the expanded matrix's gradient are B's
      const Tensor de(s_.de.data, DType::kF32, {m.out_total, rank_});
      be_.fill_zero(de);
      be_.matmul_backward(dh, de, Tensor(), dy2, h, expanded_b(site, b), WeightLayout::kOutIn);
      const Tensor rows(static_cast<float*>(de.data) + m.col * rank_, DType::kF32, {m.width, rank_});
      be_.accumulate(db, rows);
    }
    be_.scale(dh, scale_);
    const Tensor dxl(s_.dx.data, dtype_, {n_rows_, m.in}), dx2(dx.data, dx.dtype, {n_rows_, m.in});
    be_.matmul_backward(dxl, da, Tensor(), dh, xa, a, WeightLayout::kOutIn);
    if (xa.data != x2.data) drop(site, dxl);  // through the dropout: the same mask, the same 1/(1-p)
    be_.accumulate(dx2, dxl);
  }
}

}  // namespace zt::model
