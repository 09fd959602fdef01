// Megatron's split of every parameter: the kind each GPT-2 and Llama parameter gets, shards that cover
// the global tensor exactly once (cut then place = identity, for tp 1, 2, 4), fused q|k|v shards holding
// whole heads of each, and degrees that cannot split the model refused naming the ones that can. LoRA's
// adapter tables split as their base weights do (lora_B by a column-parallel base's outputs, lora_A by a
// row-parallel base's inputs), with the same coverage guarantees.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "model/lora.hpp"
#include "model/param_table.hpp"
#include "model/tp_split.hpp"

namespace zt::model {
namespace {

using Kind = TpSplit::Kind;

GptShape small_gpt2() { return GptShape::make(2, 4, 16, 100, 8); }
GptShape small_llama(int n_kv_head) { return GptShape::make_llama(2, 8, 32, 100, 8, n_kv_head, 48, false, 1e-5, {}); }

// Every module of the family adapted (rank 4).
ParamTable all_adapters(const GptShape& shape) {
  LoraSpec spec;
  spec.rank = 4;
  for (const LoraModule& m : lora_modules(shape)) spec.targets.push_back(m.name);
  return lora_table(shape, spec);
}

// The model tables and the adapter tables of both families.
std::vector<ParamTable> every_table() {
  return {ParamTable(small_gpt2()), ParamTable(small_llama(4)), all_adapters(small_gpt2()), all_adapters(small_llama(4))};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TpSplit, EveryGpt2ParameterGetsMegatronsKind) {
  const std::map<std::string, Kind> want{
      {"transformer.wte.weight", Kind::kVocab},          {"transformer.wpe.weight", Kind::kReplicated},
      {"transformer.h.1.ln_1.weight", Kind::kReplicated}, {"transformer.h.1.attn.c_attn.weight", Kind::kColumn},
      {"transformer.h.1.attn.c_attn.bias", Kind::kColumn}, {"transformer.h.1.attn.c_proj.weight", Kind::kRow},
      {"transformer.h.1.attn.c_proj.bias", Kind::kReplicated}, {"transformer.h.1.mlp.c_fc.weight", Kind::kColumn},
      {"transformer.h.1.mlp.c_fc.bias", Kind::kColumn},   {"transformer.h.1.mlp.c_proj.weight", Kind::kRow},
      {"transformer.h.1.mlp.c_proj.bias", Kind::kReplicated}, {"transformer.ln_f.bias", Kind::kReplicated}};
  const ParamTable table(small_gpt2());
  for (const auto& [name, kind] : want)
    EXPECT_EQ(tp_kind_name(tp_split_of(table.find(name), table.shape()).kind), std::string(tp_kind_name(kind))) << name;
}

TEST(TpSplit, EveryLlamaParameterGetsMegatronsKind) {
  const std::map<std::string, Kind> want{
      {"model.embed_tokens.weight", Kind::kVocab},         {"lm_head.weight", Kind::kVocab},
      {"model.layers.0.self_attn.q_proj.weight", Kind::kColumn}, {"model.layers.0.self_attn.k_proj.weight", Kind::kColumn},
      {"model.layers.0.self_attn.v_proj.weight", Kind::kColumn}, {"model.layers.0.self_attn.o_proj.weight", Kind::kRow},
      {"model.layers.0.mlp.gate_proj.weight", Kind::kColumn}, {"model.layers.0.mlp.up_proj.weight", Kind::kColumn},
      {"model.layers.0.mlp.down_proj.weight", Kind::kRow},  {"model.layers.0.input_layernorm.weight", Kind::kReplicated},
      {"model.norm.weight", Kind::kReplicated}};
  const ParamTable table(small_llama(4));
  for (const auto& [name, kind] : want)
    EXPECT_EQ(tp_kind_name(tp_split_of(table.find(name), table.shape()).kind), std::string(tp_kind_name(kind))) << name;
}

// Every parameter of both families: the tp shards, placed back, rebuild the tensor, and together hold
// exactly its elements (a split parameter's shards are disjoint: 1/tp each).
TEST(TpSplit, ShardsCoverEveryParameterExactlyOnce) {
  for (const ParamTable& table : every_table()) {
    const GptShape& shape = table.shape();
    for (const ParamInfo& p : table.params()) {
      std::vector<float> global(p.numel);
      for (std::size_t i = 0; i < global.size(); ++i) global[i] = static_cast<float>(i) + 0.5f;
      const TpSplit split = tp_split_of(p, shape);
      for (int tp : {1, 2, 4}) {
        std::vector<float> rebuilt(p.numel, -1.f);
        std::size_t held = 0;
        for (int r = 0; r < tp; ++r) {
          const std::vector<float> shard = tp_cut(global.data(), p.shape, split, tp, r);
          std::size_t want = 1;
          for (std::int64_t d : tp_shard_shape(p.shape, split, tp)) want *= static_cast<std::size_t>(d);
          ASSERT_EQ(shard.size(), want) << p.name;
          held += shard.size();
          tp_place(rebuilt.data(), shard.data(), p.shape, split, tp, r);
        }
        EXPECT_EQ(rebuilt, global) << p.name << " tp=" << tp;
        EXPECT_EQ(held, split.kind == Kind::kReplicated ? p.numel * tp : p.numel) << p.name << " tp=" << tp;
      }
    }
  }
}

// GPT-2's fused c_attn [C, 3C] = q | k | v: rank r's row is its block of q, then of k, then of v.
TEST(TpSplit, FusedQkvShardHoldsTheSameHeadsOfQKAndV) {
  const ParamTable table(small_gpt2());  // C = 16, 4 heads of 4
  const ParamInfo& p = table.find("transformer.h.0.attn.c_attn.weight");
  std::vector<float> global(p.numel);
  for (std::size_t i = 0; i < global.size(); ++i) global[i] = static_cast<float>(i);
  const std::vector<float> shard = tp_cut(global.data(), p.shape, tp_split_of(p, table.shape()), 2, 1);
  ASSERT_EQ(shard.size(), 16u * 24u);  // [C, 3C/2]
  const int C = 16, row = 3;
  for (int part = 0; part < 3; ++part)      // q, k, v
    for (int j = 0; j < C / 2; ++j)         // heads 2 and 3 of each
      EXPECT_EQ(shard[row * 24 + part * 8 + j], global[row * 3 * C + part * C + C / 2 + j]);
}

// The runs of every rank's whole shard table cover the global buffer exactly once, and any local range's
// values (cut from a global buffer of distinct values) are the global values at its runs.
TEST(TpSplit, GlobalRunsCoverTheModelOnceAndLineUpWithTheShards) {
  for (const ParamTable& global : every_table()) {
    std::vector<float> values(global.numel());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    for (int tp : {1, 2, 4}) {
      const ParamTable local = tp_local_table(global, tp);
      std::vector<int> covered(global.numel(), 0);
      for (int r = 0; r < tp; ++r) {
        const std::vector<float> shard = tp_cut_flat(global, local, values.data(), tp, r);
        for (const TpRun& run : tp_global_runs(global, local, tp, r, 0, static_cast<std::int64_t>(local.numel())))
          for (std::int64_t k = 0; k < run.numel; ++k) ++covered[run.global_offset + k];
        for (std::int64_t at = 0; at < static_cast<std::int64_t>(local.numel()); at += 37)  // ranges across params
          for (const TpRun& run : tp_global_runs(global, local, tp, r, at, 37))
            for (std::int64_t k = 0; k < run.numel; ++k)
              ASSERT_EQ(shard[run.local_offset + k], values[run.global_offset + k]) << "tp=" << tp << " r=" << r;
      }
      for (std::size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "global element " << i << " tp=" << tp;
    }
  }
}

// What a resume or initialisation reads: every local element once (replicated parameters on every
// rank), the value tp_cut_flat puts there, except the vocabulary tables' zero rows, which map nowhere.
TEST(TpSplit, SourceRunsFillEveryShardElementButTheZeroRows) {
  for (const ParamTable& global : every_table()) {
    const GptShape& shape = global.shape();
    std::vector<float> values(global.numel());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i + 1);
    for (int tp : {1, 2, 4}) {
      const ParamTable local = tp_local_table(global, tp);
      std::size_t zero_rows = 0;
      for (const ParamInfo& p : local.params())
        if (tp > 1 && tp_split_of(p, shape).kind == Kind::kVocab)  // tp = 1: the global table, no zero row
          zero_rows += static_cast<std::size_t>(p.shape[1]);
      for (int r = 0; r < tp; ++r) {
        const std::vector<float> shard = tp_cut_flat(global, local, values.data(), tp, r);
        std::vector<float> read(local.numel(), 0.f);
        std::vector<int> covered(local.numel(), 0);
        for (std::int64_t at = 0; at < static_cast<std::int64_t>(local.numel()); at += 41)  // ranges across params
          for (const TpRun& run : tp_source_runs(global, local, tp, r, at, 41))
            for (std::int64_t k = 0; k < run.numel; ++k) {
              ++covered[run.local_offset + k];
              read[run.local_offset + k] = values[run.global_offset + k];
            }
        EXPECT_EQ(read, shard) << "tp=" << tp << " r=" << r;  // zero rows: 0 in both
        EXPECT_EQ(static_cast<std::size_t>(std::count(covered.begin(), covered.end(), 0)), zero_rows);
        EXPECT_EQ(std::count_if(covered.begin(), covered.end(), [](int c) { return c > 1; }), 0);
      }
    }
  }
}

TEST(TpSplit, AdaptersFollowTheirBaseWeightsSplit) {
  const std::map<std::string, std::pair<Kind, int>> want{  // kind, cut axis
      {"base_model.model.transformer.h.1.attn.c_attn.lora_A.weight", {Kind::kReplicated, 0}},
      {"base_model.model.transformer.h.1.attn.c_attn.lora_B.weight", {Kind::kColumn, 0}},
      {"base_model.model.transformer.h.1.attn.c_proj.lora_A.weight", {Kind::kRow, 1}},
      {"base_model.model.transformer.h.1.attn.c_proj.lora_B.weight", {Kind::kReplicated, 0}},
      {"base_model.model.transformer.h.1.mlp.c_fc.lora_B.weight", {Kind::kColumn, 0}},
      {"base_model.model.transformer.h.1.mlp.c_proj.lora_A.weight", {Kind::kRow, 1}},
      {"base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight", {Kind::kReplicated, 0}},
      {"base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight", {Kind::kColumn, 0}},
      {"base_model.model.model.layers.0.self_attn.o_proj.lora_A.weight", {Kind::kRow, 1}},
      {"base_model.model.model.layers.0.mlp.up_proj.lora_B.weight", {Kind::kColumn, 0}},
      {"base_model.model.model.layers.0.mlp.down_proj.lora_A.weight", {Kind::kRow, 1}},
      {"base_model.model.model.layers.0.mlp.down_proj.lora_B.weight", {Kind::kReplicated, 0}}};
  const ParamTable gpt2 = all_adapters(small_gpt2()), llama = all_adapters(small_llama(4));
  for (const auto& [name, kind_dim] : want) {
    const ParamTable& table = name.find("transformer") != std::string::npos ? gpt2 : llama;
    const TpSplit split = tp_split_of(table.find(name), table.shape());
    EXPECT_EQ(tp_kind_name(split.kind), std::string(tp_kind_name(kind_dim.first))) << name;
    if (split.kind != Kind::kReplicated) {
      EXPECT_EQ(split.dim, kind_dim.second) << name;
    }
  }
  // c_attn's lora_B [3C, r]: rank r's rows are the output columns of its base shard, its heads' q, k, v.
  const ParamTable base(small_gpt2());
  const ParamInfo& w = base.find("transformer.h.0.attn.c_attn.weight");
  const ParamInfo& b = gpt2.find("base_model.model.transformer.h.0.attn.c_attn.lora_B.weight");
  std::vector<float> columns(static_cast<std::size_t>(w.shape[1])), rows(static_cast<std::size_t>(b.shape[0] * 4));
  for (std::size_t i = 0; i < columns.size(); ++i) columns[i] = static_cast<float>(i);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i / 4);  // row o holds o
  const TpSplit by_column{Kind::kColumn, 1, tp_split_of(w, base.shape()).segments};
  for (int r = 0; r < 2; ++r) {
    const std::vector<float> mine = tp_cut(columns.data(), {1, w.shape[1]}, by_column, 2, r);
    const std::vector<float> adapter = tp_cut(rows.data(), b.shape, tp_split_of(b, gpt2.shape()), 2, r);
    for (std::size_t o = 0; o < mine.size(); ++o) EXPECT_EQ(adapter[o * 4], mine[o]) << "rank " << r << " row " << o;
  }
}

TEST(TpSplit, DegreeNotDividingTheKvHeadsNamesTheValidDegrees) {
  // 8 query heads, 2 K/V heads: tp 4 would split a K/V head.
  const std::string msg = error_of([] { check_tp_degree(small_llama(2), 4); });
  EXPECT_NE(msg.find("parallel.tp=4 does not divide the K/V heads (model.n_kv_head)=2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("use parallel.tp in {1, 2}"), std::string::npos) << msg;
  EXPECT_EQ(error_of([] { check_tp_degree(small_llama(2), 2); }), "");
  EXPECT_EQ(error_of([] { check_tp_degree(small_llama(8), 8); }), "");
  const std::string heads = error_of([] { check_tp_degree(small_gpt2(), 8); });  // 4 heads
  EXPECT_NE(heads.find("does not divide model.n_head=4"), std::string::npos) << heads;
  EXPECT_NE(heads.find("{1, 2, 4}"), std::string::npos) << heads;
  // On a known world the degrees named divide it too (outside sweep 38 F3: 3 ranks take tp=1 only).
  const std::string world = error_of([] { check_tp_degree(small_llama(2), 4, "parallel.tp", 3, "the world of 3 rank(s)"); });
  EXPECT_NE(world.find("use parallel.tp in {1} (of the model's {1, 2}, those that divide the world of 3 rank(s))"),
            std::string::npos) << world;
}

// The vocabulary needs no divisibility: ceil(Vp / tp) rows a rank, the last shard's rows past Vp padding
// that maps nowhere (zero); tp = 3 is then left to the heads and the MLP to allow.
TEST(TpSplit, VocabularyRowsSplitUnevenlyTheLastShardPadded) {
  const GptShape s = GptShape::make(2, 6, 24, 100, 8);  // Vp = 128: 43 + 43 + 42 rows
  const ParamTable table(s);
  const ParamInfo& wte = table.find("transformer.wte.weight");
  const TpSplit split = tp_split_of(wte, s);
  ASSERT_EQ(split.kind, Kind::kVocab);
  EXPECT_EQ(vocab_shard_rows(s, 3), 43);
  EXPECT_EQ(tp_shard_shape(wte.shape, split, 3), (std::vector<std::int64_t>{43, 24}));
  std::vector<float> global(wte.numel), rebuilt(wte.numel, -1.f);
  for (std::size_t i = 0; i < global.size(); ++i) global[i] = static_cast<float>(i) + 0.5f;
  for (int r = 0; r < 3; ++r) {
    const std::vector<float> shard = tp_cut(global.data(), wte.shape, split, 3, r);
    ASSERT_EQ(shard.size(), 43u * 24);
    if (r == 2) {  // its 43rd row would be global row 128: padding
      EXPECT_TRUE(std::all_of(shard.begin() + 42 * 24, shard.end(), [](float x) { return x == 0.f; }));
    }
    tp_place(rebuilt.data(), shard.data(), wte.shape, split, 3, r);
  }
  EXPECT_EQ(rebuilt, global);
  EXPECT_EQ(error_of([&] { check_tp_degree(s, 3); }), "");
  EXPECT_EQ(tp_local_table(table, 3).find("transformer.wte.weight").shape[0], 44);  // and the zero row
}

}  // namespace
}  // namespace zt::model
