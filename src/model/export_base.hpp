// What an export of a fine-tune takes from the Hugging Face directory it started from (the run's
// init.from, or a PEFT directory's base): the base's context, and the config.json fields no ztrain key holds.
#pragma once

#include <string>
#include <vector>

#include "model/param_table.hpp"

namespace zt::model {

struct ExportWeights {
  ParamTable table;
  std::vector<float> weights;  // fp32, table's flat layout
};

// The shape with the base's context when that is longer than shape.seq_len (below).
GptShape at_base_context(GptShape shape, const std::string& base);

// The exported model at its base's context when the run trained at a shorter model.seq_len: Llama's
// max_position_embeddings (config only), GPT-2's position table widened to the base's n_positions, rows
// past the run's seq_len (which the run never held, hence never trained) read from the base. Unchanged
// when `base` is not a model directory or its context is not longer. Throws InputError naming the base.
ExportWeights at_base_context(ParamTable table, std::vector<float> weights, const std::string& base);

// What the base's config.json says that the model's shape does not, written into export_dir/config.json
// (which the export wrote from the shape): bos_token_id, eos_token_id and pad_token_id (generate() reads
// them when no generation_config.json says), and a Mistral base's class and sliding_window. Nothing when
// `base` is not a model directory.
void carry_base_config(const std::string& export_dir, const std::string& base);

// The files of a base directory an export carries: its config.json's fields and the tokenizer's files.
inline constexpr const char* kBaseFilesExported[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                                     "special_tokens_map.json", "vocab.json", "merges.txt",
                                                     "generation_config.json"};

// What an export takes from `base` beyond the trained weights, as one SHA-256: the files above and,
// for a learned position table longer than the run's (`trained`: the run's shape), that table's values.
// "" when `base` is not a model directory. A full fine-tune records it at its start (TrainState
// init_from_sha256); an export recomputes it and refuses a base that changed since (outside sweep 32 F1).
std::string base_fingerprint(const std::string& base, const GptShape& trained);

}  // namespace zt::model
