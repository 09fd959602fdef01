// The model a ztrain checkpoint or a Hugging Face directory holds, as zckpt exports it and zgen runs it:
// its parameter table, checked against the checkpoint's manifest, and its fp32 weights (a LoRA
// checkpoint's adapters merged into the base its run fine-tuned, checked against the recorded hash).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/reader.hpp"
#include "config/config.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// The resolved configuration of the run that wrote checkpoint c (state.json keeps its INI).
config::Config checkpoint_config(const ckpt::Checkpoint& c);
// The table the checkpoint's manifest describes (a LoRA checkpoint: its adapters'), checked against it.
ParamTable checkpoint_table(const ckpt::Checkpoint& c);
// The whole model's table (a LoRA checkpoint: the base its adapters sit on), from the run's [model] keys.
ParamTable checkpoint_base_table(const ckpt::Checkpoint& c);
// A LoRA checkpoint's base (the run's init.from, or its seeded init) with the adapters merged in, over
// checkpoint_base_table(c). Throws ConfigError for a checkpoint without adapters, InputError when the
// base on disk is not the one the run trained on.
std::vector<float> checkpoint_merged_weights(const ckpt::Checkpoint& c, const ParamTable& base);

struct SavedModel {
  config::Config config;       // the model's keys (and a checkpoint's run's other keys: data.vocab)
  ParamTable table;            // the whole model
  std::vector<float> weights;  // fp32, table's flat layout
  std::int64_t context = 0;    // positions the model takes: a checkpoint's model.seq_len, config.json's
  std::string source;          // "step 40 of runs/x/checkpoints/step_00000040 (LoRA merged)", "Hugging Face directory D"
  bool checkpoint = false;
};

// path: a committed ztrain checkpoint directory (MANIFEST.json), or a Hugging Face model directory
// (config.json beside model.safetensors or its shards). Throws ConfigError / InputError /
// CheckpointError naming the path and what it lacks.
// weights = false: everything but the weights (empty), so a job can be planned before it reads them.
SavedModel load_saved_model(const std::string& path, bool weights = true);

}  // namespace zt::model
