// Megatron's split by parameter name, and cutting/placing shards in the global row-major tensor.
#include "model/tp_split.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "core/error.hpp"
#include "model/family.hpp"

namespace zt::model {
namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

TpSplit split(TpSplit::Kind kind, int dim, std::vector<std::int64_t> segments) { return {kind, dim, std::move(segments)}; }

// LoRA's adapters (lora.hpp: base_model.model.<module>.lora_A.weight [r, in], lora_B.weight [out, r]) follow
// their base weight: on a column-parallel module lora_B is cut by output rows exactly as the base's output
// columns (GPT-2's fused c_attn as q | k | v, so rank r's rows are its heads' q, k and v; Llama's q, k, v,
// gate and up are one module each) and lora_A is replicated; on a row-parallel module lora_A is cut by
// input columns as the base's input rows and lora_B is replicated.
TpSplit adapter_split(const ParamInfo& p, const GptShape& s, bool is_a) {
  using K = TpSplit::Kind;
  ParamInfo base;
  base.name = p.name.substr(0, p.name.size() - std::strlen(".lora_A.weight")) + ".weight";
  base.name = base.name.substr(std::strlen("base_model.model."));
  base.shape = {1, 1};  // the split's kind and GPT-2's segments come from the name
  const TpSplit of_base = family_of(s.arch).tp_split(base, s);
  if (of_base.kind == K::kColumn && !is_a)  // a fused base's segments (GPT-2's q | k | v) cut B's rows alike
    return split(K::kColumn, 0, of_base.segments.size() > 1 ? of_base.segments : std::vector<std::int64_t>{p.shape[0]});
  if (of_base.kind == K::kRow && is_a) return split(K::kRow, 1, {p.shape[1]});
  return {};
}

std::string divisors_of_all(const std::vector<std::int64_t>& values) {
  std::string out;
  for (std::int64_t d = 1; d <= values.front(); ++d)
    if (std::all_of(values.begin(), values.end(), [d](std::int64_t v) { return v % d == 0; }))
      out += cat(out.empty() ? "" : ", ", d);
  return out;
}

// Visits, for every index before `dim` and every segment, the run of elements rank r holds: its
// offset in the global tensor and in the shard, and its length.
template <typename Visit>
void for_each_run(const std::vector<std::int64_t>& shape, const TpSplit& split, int tp, int r, Visit visit) {
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < split.dim; ++i) outer *= shape[i];
  for (std::size_t i = split.dim + 1; i < shape.size(); ++i) inner *= shape[i];
  const std::int64_t along = shape[split.dim];
  const bool vocab = split.kind == TpSplit::Kind::kVocab;  // blocks of ceil(seg / tp), the last one short
  std::int64_t shard_at = 0;
  for (std::int64_t o = 0; o < outer; ++o) {
    std::int64_t segment_start = 0;
    for (std::int64_t seg : split.segments) {
      const std::int64_t block = vocab ? (seg + tp - 1) / tp : seg / tp;
      const std::int64_t held = std::clamp<std::int64_t>(seg - r * block, 0, block);
      if (held > 0) visit((o * along + segment_start + r * block) * inner, shard_at, held * inner);
      shard_at += block * inner;
      segment_start += seg;
    }
  }
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

void check_cuttable(const std::vector<std::int64_t>& shape, const TpSplit& split, int tp) {
  ZT_CHECK(split.dim >= 0 && static_cast<std::size_t>(split.dim) < shape.size(), "tp split: axis outside the shape");
  ZT_CHECK_EQ(std::accumulate(split.segments.begin(), split.segments.end(), std::int64_t{0}), shape[split.dim],
              "tp split: segments do not cover the axis");
  if (split.kind == TpSplit::Kind::kVocab) return;  // rows rounded up to whole blocks
  for (std::int64_t seg : split.segments) ZT_CHECK_EQ(seg % tp, 0, "tp split: a segment tp does not divide");
}

}  // namespace

const char* tp_kind_name(TpSplit::Kind kind) {
  switch (kind) {
    case TpSplit::Kind::kReplicated: return "replicated";
    case TpSplit::Kind::kColumn: return "column";
    case TpSplit::Kind::kRow: return "row";
    case TpSplit::Kind::kVocab: return "vocab";
  }
  return "?";
}

TpSplit tp_split_of(const ParamInfo& p, const GptShape& s) {
  const bool lora_a = ends_with(p.name, ".lora_A.weight");
  if (lora_a || ends_with(p.name, ".lora_B.weight")) return adapter_split(p, s, lora_a);
  return family_of(s.arch).tp_split(p, s);
}

void check_tp_degree(const GptShape& s, int tp, const std::string& key, std::int64_t ranks, const std::string& ranks_text) {
  if (tp == 1) return;
  const std::string model = divisors_of_all({s.n_head, s.n_kv_head, s.ffn_hidden});
  // On a known world: the model's degrees that divide it too (outside sweep 38 F3: 8 heads on 3 ranks take tp=1 only).
  const std::string on_world = ranks > 0 ? divisors_of_all({s.n_head, s.n_kv_head, s.ffn_hidden, ranks}) : model;
  const std::string valid = on_world == model ? model + "}"
                                              : cat(on_world, "} (of the model's {", model, "}, those that divide ",
                                                    ranks_text.empty() ? cat(ranks, " ranks") : ranks_text, ")");
  auto need = [&](std::int64_t value, const char* what, const char* why) {
    if (value % tp != 0)
      throw ConfigError(cat(key, "=", tp, " does not divide ", what, "=", value, ": ", why, "; use ", key, " in {", valid));
  };
  need(s.n_head, "model.n_head", "each tensor-parallel rank computes whole attention heads");
  need(s.n_kv_head, "the K/V heads (model.n_kv_head)",
       "grouped-query attention keeps each K/V head with the query heads it serves, whole on one rank");
  need(s.ffn_hidden, "the MLP width", "each rank holds an equal block of the MLP's hidden units");
}

std::int64_t vocab_shard_rows(const GptShape& s, int tp) { return (std::int64_t{s.padded_vocab} + tp - 1) / tp; }

std::vector<std::int64_t> tp_shard_shape(const std::vector<std::int64_t>& shape, const TpSplit& split, int tp) {
  if (split.kind == TpSplit::Kind::kReplicated) return shape;
  check_cuttable(shape, split, tp);
  std::vector<std::int64_t> out = shape;
  out[split.dim] = split.kind == TpSplit::Kind::kVocab ? (out[split.dim] + tp - 1) / tp : out[split.dim] / tp;
  return out;
}

std::vector<float> tp_cut(const float* global, const std::vector<std::int64_t>& shape, const TpSplit& split, int tp,
                          int r) {
  if (split.kind == TpSplit::Kind::kReplicated) return {global, global + numel(shape)};
  std::vector<float> shard(static_cast<std::size_t>(numel(tp_shard_shape(shape, split, tp))));
  for_each_run(shape, split, tp, r, [&](std::int64_t at, std::int64_t shard_at, std::int64_t n) {
    std::copy_n(global + at, n, shard.data() + shard_at);
  });
  return shard;
}

void tp_place(float* global, const float* shard, const std::vector<std::int64_t>& shape, const TpSplit& split, int tp,
              int r) {
  if (split.kind == TpSplit::Kind::kReplicated) {
    std::copy_n(shard, numel(shape), global);
    return;
  }
  check_cuttable(shape, split, tp);
  for_each_run(shape, split, tp, r, [&](std::int64_t at, std::int64_t shard_at, std::int64_t n) {
    std::copy_n(shard + shard_at, n, global + at);
  });
}

ParamTable tp_local_table(const ParamTable& global, int tp) {
  if (tp == 1) return global;  // the plain model: no shard, no zero row
  check_tp_degree(global.shape(), tp);
  std::vector<ParamInfo> params = global.params();
  for (ParamInfo& p : params) {
    const TpSplit split = tp_split_of(p, global.shape());
    p.shape = tp_shard_shape(p.shape, split, tp);
    if (split.kind == TpSplit::Kind::kVocab) p.shape[0] += 1;  // the zero row
    p.hf_shape = p.shape;
  }
  return ParamTable(global.shape(), params, global.n_units());  // a stage's table keeps its empty units
}

std::vector<float> tp_cut_flat(const ParamTable& global, const ParamTable& local, const float* global_flat, int tp, int r) {
  std::vector<float> out(local.numel(), 0.f);
  for (const ParamInfo& l : local.params()) {
    const ParamInfo& g = global.find(l.name);
    const std::vector<float> shard = tp_cut(global_flat + g.offset, g.shape, tp_split_of(g, global.shape()), tp, r);
    std::copy(shard.begin(), shard.end(), out.begin() + static_cast<std::ptrdiff_t>(l.offset));
  }
  return out;
}

void tp_place_flat(const ParamTable& global, const ParamTable& local, const float* local_flat, float* global_flat, int tp,
                   int r) {
  for (const ParamInfo& l : local.params()) {
    const ParamInfo& g = global.find(l.name);
    tp_place(global_flat + g.offset, local_flat + l.offset, g.shape, tp_split_of(g, global.shape()), tp, r);
  }
}

namespace {
// tp_global_runs (replicated parameters from TP rank 0 only) and tp_source_runs (from every rank). A
// local parameter is found in the global table by name (a pipeline stage's table holds some of them);
// at tp = 1 each is one run, whatever its split.
std::vector<TpRun> runs_of(const ParamTable& global, const ParamTable& local, int tp, int r, std::int64_t offset,
                           std::int64_t numel, bool replicated_everywhere) {
  std::vector<TpRun> runs;
  const std::int64_t end = offset + numel;
  for (std::size_t i = 0; i < local.params().size(); ++i) {
    const ParamInfo& lp = local.params()[i];
    const std::int64_t p_lo = static_cast<std::int64_t>(lp.offset), p_hi = p_lo + static_cast<std::int64_t>(lp.numel);
    if (p_hi <= offset || p_lo >= end) continue;
    const ParamInfo& gp = global.find(lp.name);
    // [lo, hi): the query's part of this parameter, as offsets inside the shard
    const std::int64_t lo = std::max(offset, p_lo) - p_lo, hi = std::min(end, p_hi) - p_lo;
    const TpSplit split = tp_split_of(gp, global.shape());
    auto emit = [&](std::int64_t global_at, std::int64_t shard_at, std::int64_t n) {
      const std::int64_t a = std::max(lo, shard_at), b = std::min(hi, shard_at + n);
      if (a < b) runs.push_back({p_lo + a, static_cast<std::int64_t>(gp.offset) + global_at + (a - shard_at), b - a});
    };
    if (split.kind == TpSplit::Kind::kReplicated || tp == 1) {
      if (r == 0 || replicated_everywhere) emit(0, 0, static_cast<std::int64_t>(gp.numel));
    } else {
      for_each_run(gp.shape, split, tp, r, emit);
    }
  }
  return runs;
}

}  // namespace

std::vector<TpRun> tp_global_runs(const ParamTable& global, const ParamTable& local, int tp, int r, std::int64_t offset,
                                  std::int64_t numel) {
  return runs_of(global, local, tp, r, offset, numel, false);
}

std::vector<TpRun> tp_source_runs(const ParamTable& global, const ParamTable& local, int tp, int r, std::int64_t offset,
                                  std::int64_t numel) {
  return runs_of(global, local, tp, r, offset, numel, true);
}

}  // namespace zt::model
