// Megatron-LM's tensor-parallel split of every GPT-2 and Llama parameter (Shoeybi et al. 2019, §3):
// the QKV and MLP-up (Llama: gate|up) projections are column-parallel (each rank holds whole heads /
// a block of hidden units), the attention-output and MLP-down projections row-parallel, the token
// embedding and an untied LM head vocabulary-parallel (a block of rows each); norms, biases after a
// row-parallel layer and GPT-2's position table are replicated. LoRA adapters (lora.hpp) follow their base
// weight: lora_B cut as a column-parallel base's outputs, lora_A as a row-parallel base's inputs, the other
// factor replicated. Host-side arithmetic only: which
// elements of a global tensor rank r of tp holds, so that shards are cut from, and checkpoints
// written back to, the global shape.
#pragma once

#include <cstdint>
#include <vector>

#include "model/param_table.hpp"

namespace zt::model {

// How one parameter is cut. Along `dim`, the tensor is a run of segments (GPT-2's fused c_attn is
// q | k | v: three); each segment is cut into tp equal blocks, and rank r's shard is the concatenation
// of block r of every segment, so rank r's fused q|k|v holds whole heads of q, k and v alike. A
// vocabulary table's rows need not divide: each rank holds ceil(Vp / tp) rows (vocab_shard_rows), the
// last ones past Vp padding that maps nowhere (zero, never a target: Megatron pads the vocabulary to a
// multiple of tp instead, which would change the global shape a checkpoint keeps).
struct TpSplit {
  enum class Kind { kReplicated, kColumn, kRow, kVocab };
  Kind kind = Kind::kReplicated;
  int dim = 0;                          // the tensor axis cut (unused when replicated)
  std::vector<std::int64_t> segments;   // their sizes along dim, summing to shape[dim]
};

const char* tp_kind_name(TpSplit::Kind kind);  // "replicated", "column", "row", "vocab"

// The split of parameter p of a model of this shape (by its Hugging Face name, or PEFT's for an adapter).
TpSplit tp_split_of(const ParamInfo& p, const GptShape& shape);

// Throws ConfigError unless tp divides what it must: the heads, the K/V heads (GQA: naming the
// degrees that work) and the MLP width. ranks > 0: the ranks tp must also divide (the world over
// parallel.pp), so that the degrees named pass that rule too; ranks_text says what they are.
void check_tp_degree(const GptShape& shape, int tp, const std::string& key = "parallel.tp", std::int64_t ranks = 0,
                     const std::string& ranks_text = "");

// A TP rank's rows of the token embedding and LM head: ceil(Vp / tp) (without the zero row).
std::int64_t vocab_shard_rows(const GptShape& shape, int tp);

// The shard's shape: shape with shape[dim] / tp, rounded up for a vocabulary table (shape itself when
// replicated).
std::vector<std::int64_t> tp_shard_shape(const std::vector<std::int64_t>& shape, const TpSplit& split, int tp);

// Rank r's shard of `global` (row-major, `shape`), and the inverse: writes `shard` back into its place
// in `global`. Replicated parameters copy whole.
std::vector<float> tp_cut(const float* global, const std::vector<std::int64_t>& shape, const TpSplit& split, int tp,
                          int r);
void tp_place(float* global, const float* shard, const std::vector<std::int64_t>& shape, const TpSplit& split, int tp,
              int r);

// The table of a TP rank's shard (the same for every rank of the group; tp = 1: the global table itself):
// each parameter in its shard shape, and a vocabulary-parallel table with one more row, the zero row that the lookup of other
// ranks' ids reads (layers/vocab_parallel.hpp). Its shape() and units are still the global model's.
// global may also be a pipeline stage's table (model/stage_split.hpp: parallel.pp x parallel.tp).
ParamTable tp_local_table(const ParamTable& global, int tp);
// Rank r's flat buffer (local table) cut from a flat buffer of the global table (zero rows zero), and
// the inverse: rank r's parts written into their places in the global flat buffer. Here and below,
// local is tp_local_table of the global table or of a stage's table: its parameters are matched with
// the global table's by name.
std::vector<float> tp_cut_flat(const ParamTable& global, const ParamTable& local, const float* global_flat, int tp, int r);
void tp_place_flat(const ParamTable& global, const ParamTable& local, const float* local_flat, float* global_flat, int tp,
                   int r);

// Where the local flat elements [offset, offset + numel) of rank r's shard table sit in the global flat
// buffer: runs in local order, so state copied from the local range lines up with them (what a
// checkpoint in global shape writes per rank, and what a resume on another layout reads). Replicated
// parameters belong to TP rank 0 only (other ranks get no run for them, so the runs of all ranks cover
// the global buffer exactly once), and a vocabulary table's zero row maps nowhere.
struct TpRun {
  std::int64_t local_offset = 0, global_offset = 0, numel = 0;
  bool operator==(const TpRun&) const = default;
};
std::vector<TpRun> tp_global_runs(const ParamTable& global, const ParamTable& local, int tp, int r, std::int64_t offset,
                                  std::int64_t numel);
// The same for reading a shard from global state (initialisation, resume): replicated parameters are
// read by every TP rank; the zero row still maps nowhere (the reader fills it with 0).
std::vector<TpRun> tp_source_runs(const ParamTable& global, const ParamTable& local, int tp, int r, std::int64_t offset,
                                  std::int64_t numel);

}  // namespace zt::model
