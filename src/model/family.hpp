// What ztrain knows of each model family, in one place: the decoder's data (its norm, its position
// table), its block, its parameters (Hugging Face names, shapes, units), Megatron's split of each, the
// modules LoRA adapts, initialisation and the config.json it exports. The decoder, the parameter table,
// the TP split, LoRA, the planner, checkpoints and export read it instead of branching on the family.
// A family is one subclass (gpt2.cpp, llama.cpp) and one line in family.cpp's table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "layers/norm.hpp"
#include "model/decoder.hpp"
#include "model/lora.hpp"
#include "model/param_table.hpp"
#include "model/tp_split.hpp"

namespace zt::model {

// One matmul of a block: [N, in] x [in, out]; column-parallel (out cut over TP) or row-parallel (in cut).
struct BlockMatmulShape {
  BlockMatmul matmul;
  std::int64_t in = 0, out = 0;
  bool column_parallel = true;
};

class Family {
 public:
  virtual ~Family() = default;
  Arch arch;
  const char* name;               // model.arch's value: "gpt2"
  const char* display;            // in messages and the start-up line: "GPT-2"
  layers::NormKind norm;          // the blocks' and the final norm's
  bool learned_positions;         // a position table (wpe) after the token embedding in unit 0
  backend::WeightLayout weights;  // the blocks' matmul weights: HF Conv1D [in, out] or nn.Linear [out, in]

  // The shape of a [model] section (the keys this family reads; validate.cpp refuses the others).
  virtual GptShape shape_of(const config::ModelConfig& m) const = 0;
  // The block code, for the decoder's geometry.
  virtual std::unique_ptr<Block> make_block(const Geometry& g) const = 0;
  // The parameters in flat order (ParamTable): unit 0 = the token embedding (+ positions), 1..L blocks,
  // L+1 the final norm (+ an untied head), each block's in the family's order (its Block reads them so).
  virtual std::vector<ParamInfo> params(const GptShape& s) const = 0;
  // Megatron's cut of parameter p (by its HF name; tp_split.hpp): replicated unless the family says.
  virtual TpSplit tp_split(const ParamInfo& p, const GptShape& s) const = 0;
  // The modules LoRA can adapt in a block, in the family's order, and where block l's live in HF names.
  virtual std::vector<LoraModule> lora_modules(const GptShape& s) const = 0;
  virtual std::string block_prefix(int l) const = 0;
  // The initial std of a decayed parameter (HF's _init_weights; 0.02 unless the family scales some).
  virtual float init_std(const ParamInfo& p, const GptShape& s) const;
  // The family as the start-up line names it, with the variant the shape selects ("Llama (q, k, v biases:
  // Qwen2)").
  virtual std::string describe(const GptShape& /*s*/) const { return display; }
  // The Hugging Face config.json of a model of this shape (its architecture, fields and defaults).
  virtual std::string hf_config_json(const GptShape& s, const std::string& torch_dtype) const = 0;
  // transformers' class of a model of this shape, as the family's config names it: `causal_lm` (its LM
  // head's model), or for a value head (PPO's critic) `prefix` + "ForSequenceClassification" (one label:
  // TRL's value and reward models).
  static std::string hf_architecture(const GptShape& s, const std::string& prefix, const std::string& causal_lm) {
    return s.value_head ? prefix + "ForSequenceClassification" : causal_lm;
  }

  // What the model costs (cost.hpp reads these). A token's attention FLOPs in one block, forward +
  // backward: 12 A T by default (PaLM: QK^T and AV over all T keys, A the heads' width).
  virtual double attention_flops(const GptShape& s) const;
  // Per block, the floats of replicated parameters applied per head, whose gradients the TP group sums
  // every micro-batch since each rank holds some heads (Qwen3's q_norm and k_norm); 0 by default.
  virtual std::int64_t head_replicated_floats(const GptShape& /*s*/) const { return 0; }
  // A block's matmuls at tp = 1, once each (from lora_modules: the modules of one matmul share it).
  std::vector<BlockMatmulShape> block_matmuls(const GptShape& s) const;

 protected:
  Family(Arch a, const char* n, const char* d, layers::NormKind k, bool positions, backend::WeightLayout w)
      : arch(a), name(n), display(d), norm(k), learned_positions(positions), weights(w) {}
};

const Family& family_of(Arch arch);

// One parameter of a family's table: shape as stored in the flat buffer; a vocabulary table's rows are
// padded to Vp and saved with V (hf_rows, 0: as stored).
ParamInfo param_info(std::string name, std::vector<std::int64_t> shape, int unit, bool decay, std::int64_t hf_rows = 0);

}  // namespace zt::model
