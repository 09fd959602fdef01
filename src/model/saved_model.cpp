// Checkpoints and Hugging Face directories as models to run (saved_model.hpp).
#include "model/saved_model.hpp"

#include <filesystem>

#include "ckpt/layout.hpp"
#include "config/hf_config.hpp"
#include "config/lora.hpp"
#include "config/parse.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/sha256.hpp"
#include "model/checkpoint_desc.hpp"
#include "model/family.hpp"
#include "model/from_config.hpp"
#include "model/hf_dir.hpp"
#include "model/init.hpp"
#include "model/lora.hpp"
#include "model/nf4_params.hpp"
#include "model/tp_split.hpp"
#include "model/safetensors.hpp"

namespace zt::model {
namespace fs = std::filesystem;

config::Config checkpoint_config(const ckpt::Checkpoint& c) { return config::from_ini(c.state().config_ini); }

ParamTable checkpoint_table(const ckpt::Checkpoint& c) {
  const config::Config config = checkpoint_config(c);
  if (config.lora.rank == 0) return checkpoint_base_table(c);
  ParamTable adapters = lora_table(checkpoint_base_table(c).shape(), lora_spec(config));
  if (describe_model(adapters).params != c.manifest().model.params)
    throw CheckpointError(cat(c.dir().string(), ": the manifest's parameter table is not the adapters its lora.* keys give"));
  return adapters;
}

ParamTable checkpoint_base_table(const ckpt::Checkpoint& c) {
  const ckpt::ModelDesc& m = c.manifest().model;
  const config::Config run = checkpoint_config(c);
  ParamTable table(model_shape(run.model));
  if (run.lora.rank == 0 && describe_model(table).params != m.params)
    throw CheckpointError(cat(c.dir().string(), ": the manifest's parameter table is not ",
                              family_of(table.shape().arch).display, "'s for its model shape"));
  return table;
}

std::vector<float> checkpoint_merged_weights(const ckpt::Checkpoint& c, const ParamTable& base) {
  const config::Config config = checkpoint_config(c);
  if (config.lora.rank == 0)
    throw ConfigError(cat(c.dir().string(), " is not a LoRA checkpoint (lora.rank=0): export it without --merge"));
  const std::string from = config::lora_base_path(config);
  std::error_code ec;
  if (!from.empty() && !fs::exists(from, ec))  // a run before paths were kept absolute, or a base moved away
    throw InputError(cat(c.dir().string(), ": its run's LoRA base init.from=", from, " is not found from ",
                         fs::current_path(ec).string(), " (a relative path is read from the current directory: run from ",
                         "the training run's directory, or put the base back where it was)"));
  std::vector<float> weights(base.numel());
  Nf4Weights stored;  // a bitsandbytes directory's NF4 weights: the run took them as stored
  if (from.empty()) init_params(base, config.train.seed, weights.data());
  else load_pretrained(from, base, weights.data(), &stored);
  Sha256 hash;
  hash.update(weights.data(), weights.size() * sizeof(float));
  if (to_hex(hash.finish()) != c.state().lora_base_sha256)
    throw InputError(cat(c.dir().string(), " was trained on a base with sha256 ", c.state().lora_base_sha256, ", but init.from=",
                         from, " now has another: the merge needs the run's base there"));
  // A QLoRA run (lora.base_dtype=nf4) trained its adapters on the NF4 base: merged into those values (each
  // block weight quantized and dequantized, as its model saw them), not into the fp32 base it read.
  if (config.lora.base_dtype == config::LoraBaseDtype::kNf4) {
    weights = nf4_fake_quantized(base, weights, nf4_options(config), &stored);
    // Trained at parallel.tp > 1 on shards that are not whole blocks, the run's base was quantized per shard
    // (train/lora_base.cpp): the merge into the whole tensors' quantization differs slightly (sweep 32 F3).
    const int tp = static_cast<int>(config.parallel.tp), block = nf4_options(config).block;
    if (const auto names = tp > 1 ? nf4_unaligned_shards(base, tp_local_table(base, tp), block) : std::vector<std::string>{};
        !names.empty())
      log::warn(cat(c.dir().string(), " was trained at parallel.tp=", tp, ", where ", names.size(), " NF4 weights' shards (",
                    names.front(), names.size() > 1 ? ", ..." : "", ") are not whole ", block, "-blocks: its base ",
                    "was quantized per shard, and this merge into the whole tensors' quantization differs slightly from ",
                    "the model it trained (about 1e-3 relative)"));
  }
  merge_lora(base, weights.data(), checkpoint_table(c), c.read_master().data(), lora_spec(config).scale());
  return weights;
}

namespace {

SavedModel from_checkpoint(const std::string& path, bool weights) {
  const ckpt::Checkpoint c(path);
  SavedModel m{.config = checkpoint_config(c), .table = checkpoint_base_table(c)};
  const bool lora = m.config.lora.rank > 0;
  if (weights) m.weights = lora ? checkpoint_merged_weights(c, m.table) : c.read_master();
  m.context = m.table.shape().seq_len;
  m.source = cat("step ", c.manifest().step, " of checkpoint ", path, lora ? " (LoRA adapters merged into their base)" : "");
  m.checkpoint = true;
  return m;
}

SavedModel from_hf_directory(const std::string& path, bool weights) {
  config::Config c;
  c.init.from = path;
  c.model.seq_len = config::hf_context_length(path);
  config::apply_hf_config(c, {});
  SavedModel m{.config = c, .table = ParamTable(model_shape(c.model))};
  if (weights) {
    m.weights.assign(m.table.numel(), 0.0f);
    load_pretrained(path, m.table, m.weights.data());
  }
  m.context = c.model.seq_len;
  m.source = cat("Hugging Face directory ", path, " (", family_of(m.table.shape().arch).describe(m.table.shape()), ")");
  return m;
}

// A PEFT adapter directory (adapter_config.json + adapter_model.safetensors) on the base its
// base_model_name_or_path names: the adapters merged into it, as zckpt export --merge merges a run's.
SavedModel from_peft_adapter(const std::string& path, bool weights) {
  config::Config c;
  c.init.from = path;
  config::check_peft_base(c);
  c.model.seq_len = config::hf_context_length(path);  // the base's
  config::apply_hf_config(c, {});
  config::apply_adapter_config(c);
  config::check_lora(c);
  const std::string base = config::lora_base_path(c);
  SavedModel m{.config = c, .table = ParamTable(model_shape(c.model))};
  if (weights) {
    m.weights.assign(m.table.numel(), 0.0f);
    load_pretrained(base, m.table, m.weights.data());
    const ParamTable adapters = lora_table(m.table.shape(), lora_spec(c));
    std::vector<float> adapter_weights(adapters.numel());
    load_safetensors((fs::path(path) / "adapter_model.safetensors").string(), adapters, adapter_weights.data());
    merge_lora(m.table, m.weights.data(), adapters, adapter_weights.data(), lora_spec(c).scale());
  }
  m.context = c.model.seq_len;
  m.source = cat("PEFT adapter ", path, " (rank ", c.lora.rank, ") merged into its base ", base, " (",
                 family_of(m.table.shape().arch).describe(m.table.shape()), ")");
  return m;
}

}  // namespace

SavedModel load_saved_model(const std::string& path, bool weights) {
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    throw ConfigError(cat(path, ": no such directory (a ztrain checkpoint step_N/ or a Hugging Face model directory)"));
  if (fs::exists(fs::path(path) / ckpt::kManifestFile, ec)) return from_checkpoint(path, weights);
  if (fs::exists(fs::path(path) / "config.json", ec)) return from_hf_directory(path, weights);
  if (fs::exists(fs::path(path) / "adapter_config.json", ec)) return from_peft_adapter(path, weights);
  throw ConfigError(cat(path, " holds neither ", ckpt::kManifestFile, " (a committed ztrain checkpoint), config.json (a "
                        "Hugging Face model directory) nor adapter_config.json (a PEFT adapter)"));
}

}  // namespace zt::model
