// The model's parameters as one flat fp32 buffer: every tensor with its Hugging Face name (the family's,
// family.hpp: GPT2LMHeadModel, LlamaForCausalLM), shape and flat offset, grouped in units (embeddings, each
// block, the final norm and an untied LM head) that ZeRO shards and gathers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/rope.hpp"

namespace zt::model {

using Arch = config::Arch;  // the family (family.hpp)

// The shape of either family (named for the first one). Llama's fields keep GPT-2's values for GPT-2.
struct GptShape {
  int n_layer = 0, n_head = 0, n_embd = 0;
  int vocab_size = 0;    // the real vocabulary V (50257 for GPT-2)
  int padded_vocab = 0;  // Vp: V rounded up to a multiple of 64 (wte's rows inside; padded rows stay 0)
  int seq_len = 0;       // T, the context length (wpe's rows)
  Arch arch = Arch::kGpt2;
  int n_kv_head = 0;            // K/V heads (n_head for GPT-2)
  int ffn_hidden = 0;           // MLP width (4C for GPT-2)
  bool tie_embeddings = true;   // the LM head reads the token embedding (always for GPT-2)
  double norm_eps = 1e-5;       // Llama's RMSNorm epsilon (GPT-2's LayerNorm: 1e-5 in the op)
  RopeParams rope;              // Llama only
  bool qkv_bias = false;        // Llama: the q, k, v projections have biases (Qwen2)
  bool qk_norm = false;         // Llama: RMSNorm over each q and k head before RoPE (Qwen3)
  int head_dim = 0;             // Llama: the heads' width when not n_embd / n_head (Qwen3); 0: n_embd / n_head
  // A critic (PPO): the LM head is replaced by a value head, Linear(C -> 1) without bias named score.weight
  // [1, C] after the final norm (Hugging Face's *ForTokenClassification with one label, verl's critic);
  // each token's output is its value. Never tied (tie_embeddings is false): the embedding stays a lookup.
  bool value_head = false;

  // A checked shape with padded_vocab derived from vocab_size; throws ConfigError on a bad combination.
  static GptShape make(int n_layer, int n_head, int n_embd, int vocab_size, int seq_len);
  // The same for Llama: rope, norm_eps and the K/V heads, FFN width and head tying given.
  static GptShape make_llama(int n_layer, int n_head, int n_embd, int vocab_size, int seq_len, int n_kv_head,
                             int ffn_hidden, bool tie_embeddings, double norm_eps, const RopeParams& rope);
  // Equal shapes compute the same function (every field is the function's: a resume compares them).
  bool operator==(const GptShape&) const = default;
  int head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
  int attn_width() const { return n_head * head_size(); }  // the attention's output (o_proj's input)
  int qkv_width() const { return (n_head + 2 * n_kv_head) * head_size(); }  // the fused q|k|v projection's output
};

// The critic of a model of this shape: the same body with a value head (GptShape::value_head).
GptShape value_model_shape(const GptShape& actor);

using config::llama_ffn_hidden;  // Llama's SwiGLU width rule

constexpr int kVocabMultiple = 64;
constexpr const char* kValueHeadName = "score.weight";  // GptShape::value_head's [1, C]

struct ParamInfo {
  std::string name;                    // GPT2LMHeadModel name, e.g. "transformer.h.0.attn.c_attn.weight"
  std::vector<std::int64_t> shape;     // as stored in the flat buffer (wte: [Vp, C])
  std::vector<std::int64_t> hf_shape;  // as saved and exported (wte: [V, C]); equal to shape otherwise
  std::size_t offset = 0;              // first element in the flat buffer
  std::size_t numel = 0;               // elements in the flat buffer (prod(shape))
  int unit = 0;                        // 0 embeddings, 1..L blocks, L+1 final norm (and untied LM or value head)
  bool decay = false;                  // weight decay applies: 2-D weights and embeddings, not biases/LN
  std::size_t hf_numel() const;        // prod(hf_shape): the first hf_numel elements from offset are real
};

struct Unit {
  std::size_t offset = 0;  // first element in the flat buffer
  std::size_t numel = 0;
};

// A unit a ZeRO engine takes in pieces (vocab_unit_pieces, decoder.hpp): contiguous, covering the unit.
struct UnitPieces {
  int unit = 0;
  std::vector<Unit> pieces;
};

class ParamTable;
// The table's units in flat order with those in `pieces` replaced by their pieces (checked to cover
// them): ranges[first[u] + i] is unit u's piece i (its one range when whole); first has n_units + 1 entries.
struct PiecedUnits {
  std::vector<Unit> ranges;
  std::vector<int> first;
  int pieces(int u) const { return first[static_cast<std::size_t>(u) + 1] - first[static_cast<std::size_t>(u)]; }
};
PiecedUnits pieced_units(const ParamTable& table, const std::vector<UnitPieces>& pieces);

class ParamTable {
 public:
  explicit ParamTable(const GptShape& shape);
  // A table of these parameters in this order, offsets and units recomputed from their names, shapes,
  // units and decay flags: a tensor-parallel rank's shard of the model (tp_split.hpp).
  // n_units > 0: that many units, those without parameters empty (a pipeline stage's table keeps the
  // model's unit numbers: stage_split.hpp); else units 0..the last parameter's.
  ParamTable(const GptShape& shape, const std::vector<ParamInfo>& params, int n_units = 0);

  const GptShape& shape() const { return shape_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  const std::vector<Unit>& units() const { return units_; }
  int n_units() const { return static_cast<int>(units_.size()); }  // L + 2
  std::size_t numel() const { return numel_; }                   // the flat buffer, padded rows included
  const ParamInfo& find(const std::string& name) const;           // throws on an unknown name
  const ParamInfo* find_or_null(const std::string& name) const;

  std::size_t n_params_real() const;       // without wte's padded rows: 124,439,808 for GPT-2 small
  // N in 6N + 12 L C T (docs/INTERFACE.md): the real parameters less those no matmul reads (GPT-2's wpe; the
  // token embedding when an untied LM head does the vocabulary matmul).
  std::size_t n_params_for_flops() const;

  // Index of the first parameter of unit u and one past its last.
  std::size_t first_param(int unit) const { return unit_first_[unit]; }
  std::size_t end_param(int unit) const { return unit_first_[unit + 1]; }

 private:
  void add(const std::string& name, std::vector<std::int64_t> shape, int unit, bool decay);
  void index_units(int n_units = 0);  // units_ and unit_first_ from params_ (n_units: as the constructor's)

  GptShape shape_;
  std::vector<ParamInfo> params_;
  std::vector<Unit> units_;
  std::vector<std::size_t> unit_first_;
  std::size_t numel_ = 0;
};

}  // namespace zt::model
