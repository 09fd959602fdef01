// The model a ztrain checkpoint, a Hugging Face directory or a PEFT adapter holds, as zckpt exports it and
// zgen runs it: its parameter table, checked against the checkpoint's manifest, and a reader of its fp32
// weights by range (a LoRA checkpoint's or a PEFT adapter's adapters merged into the base they were
// trained on, a tensor at a time: the whole model is never held in fp32 to load it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/reader.hpp"
#include "config/config.hpp"
#include "model/param_table.hpp"
#include "model/range_reader.hpp"

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
// The same by range (base must outlive it; c is read at once): the base read through model::InitialWeights, each adapted
// weight (and each NF4 weight of a QLoRA run) read whole, quantized and merged, one at a time. Checks the base
// against the recorded hash first (reading it once, in blocks).
ReadRange checkpoint_merged_reader(const ckpt::Checkpoint& c, const ParamTable& base);

struct SavedModel {
  enum class Kind { kCheckpoint, kHuggingFace, kPeftAdapter };
  std::string path;
  Kind kind = Kind::kHuggingFace;
  config::Config config;       // the model's keys (and a checkpoint's run's other keys: data.vocab)
  ParamTable table;            // the whole model
  std::int64_t context = 0;    // positions the model takes: a checkpoint's model.seq_len, config.json's
  std::string context_source;  // where `context` comes from, for messages (config::HfContext::source)
  std::string source;          // "step 40 of runs/x/checkpoints/step_00000040 (LoRA merged)", "Hugging Face directory D"
  bool checkpoint() const { return kind == Kind::kCheckpoint; }
  bool merged() const { return kind == Kind::kPeftAdapter || (checkpoint() && config.lora.rank > 0); }
};

// path: a committed ztrain checkpoint directory (MANIFEST.json), or a Hugging Face model directory
// (config.json beside model.safetensors or its shards). Throws ConfigError / InputError /
// CheckpointError naming the path and what it lacks. Reads no weights: a job is planned before it reads them.
SavedModel load_saved_model(const std::string& path);

// The model's flat fp32 weights by range, in the table's layout (m must outlive it): a checkpoint's master
// weights or a Hugging Face directory's tensors as asked, a merged model through checkpoint_merged_reader's
// way. Opens and checks its files now (a LoRA checkpoint's base hash too): errors before any weight is read.
ReadRange saved_weights_reader(const SavedModel& m);
// The most saved_weights_reader holds while it reads, besides the caller's block: a merged model's largest
// whole tensor in fp32 (0 otherwise), for a memory plan.
std::size_t saved_weights_reader_bytes(const SavedModel& m);

}  // namespace zt::model
