// Checkpoints and Hugging Face directories as models to run (saved_model.hpp).
#include "model/saved_model.hpp"

#include <filesystem>
#include <memory>
#include <span>

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
#include "model/initial_weights.hpp"
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

namespace {

// Which base parameters a merge reads whole: the adapted weights, and a QLoRA run's NF4 weights (quantized
// over their whole tensors, as its model saw them).
struct MergeWhole {
  std::vector<std::size_t> pair_of;  // lora_pair_of
  bool nf4 = false;
  bool operator()(const ParamTable& base, std::size_t p) const {
    return pair_of[p] != SIZE_MAX || (nf4 && nf4_quantized(base, p));
  }
};

// A merged model's state: its base's reader, its adapters (their table: a checkpoint's, checked against its
// manifest, or lora_table's; their values), how they merge.
struct Merge {
  Merge(const ParamTable& base, const std::string& from, std::uint64_t seed, const config::Config& c, bool nf4,
        ParamTable adapter_table)
      : base(base), weights(from, base, seed), adapters(std::move(adapter_table)), adapter_values(adapters.numel()),
        scale(lora_spec(c).scale()), quantization(nf4_options(c)), whole{lora_pair_of(base, adapters), nf4} {}
  const ParamTable& base;
  InitialWeights weights;
  ParamTable adapters;
  std::vector<float> adapter_values;
  double scale;
  Nf4Options quantization;
  MergeWhole whole;
};

// Each tensor merge.whole names read whole, NF4-quantized (a bitsandbytes directory's stored codes as
// stored), then its adapters merged: merge_lora (and nf4_fake_quantized) a tensor at a time.
ReadRange merged_reader(std::shared_ptr<Merge> m) {
  return whole_tensor_reader(
      m->base, [m](std::int64_t offset, std::int64_t count, float* out) { m->weights.read(offset, count, out); },
      [m](std::size_t p) { return m->whole(m->base, p); },
      [m](std::size_t p, std::span<float> values) {
        if (m->whole.nf4 && nf4_quantized(m->base, p)) {
          Nf4Weights stored;
          if (const SafetensorsReader* file = m->weights.file()) file->read_stored_nf4(p, stored);
          nf4_fake_quantize_param(m->base, p, values, m->quantization, &stored);
        }
        if (const std::size_t first = m->whole.pair_of[p]; first != SIZE_MAX)
          merge_lora_pair(m->base, m->adapters, first, m->adapter_values.data(), m->scale, values);
      });
}

}  // namespace

ReadRange checkpoint_merged_reader(const ckpt::Checkpoint& c, const ParamTable& base) {
  const config::Config config = checkpoint_config(c);
  if (config.lora.rank == 0)
    throw ConfigError(cat(c.dir().string(), " is not a LoRA checkpoint (lora.rank=0): export it without --merge"));
  const std::string from = config::lora_base_path(config);
  std::error_code ec;
  if (!from.empty() && !fs::exists(from, ec))  // a run before paths were kept absolute, or a base moved away
    throw InputError(cat(c.dir().string(), ": its run's LoRA base init.from=", from, " is not found from ",
                         fs::current_path(ec).string(), " (a relative path is read from the current directory: run from ",
                         "the training run's directory, or put the base back where it was)"));
  const bool nf4 = config.lora.base_dtype == config::LoraBaseDtype::kNf4;
  auto merge = std::make_shared<Merge>(base, from, config.train.seed, config, nf4, checkpoint_table(c));
  if (merge->weights.sha256() != c.state().lora_base_sha256)
    throw InputError(cat(c.dir().string(), " was trained on a base with sha256 ", c.state().lora_base_sha256, ", but init.from=",
                         from, " now has another: the merge needs the run's base there"));
  merge->adapter_values = c.read_master();  // the manifest's table: checkpoint_table(c)'s numel
  // A QLoRA run (lora.base_dtype=nf4) trained its adapters on the NF4 base: merged into those values (each
  // block weight quantized and dequantized, as its model saw them), not into the fp32 base it read.
  // Trained at parallel.tp > 1 on shards that are not whole blocks, the run's base was quantized per shard
  // (train/lora_base.cpp): the merge into the whole tensors' quantization differs slightly (sweep 32 F3).
  const int tp = static_cast<int>(config.parallel.tp), block = nf4_options(config).block;
  if (const auto names = nf4 && tp > 1 ? nf4_unaligned_shards(base, tp_local_table(base, tp), block) : std::vector<std::string>{};
      !names.empty())
    log::warn(cat(c.dir().string(), " was trained at parallel.tp=", tp, ", where ", names.size(), " NF4 weights' shards (",
                  names.front(), names.size() > 1 ? ", ..." : "", ") are not whole ", block, "-blocks: its base ",
                  "was quantized per shard, and this merge into the whole tensors' quantization differs slightly from ",
                  "the model it trained (about 1e-3 relative)"));
  return merged_reader(std::move(merge));
}

std::vector<float> checkpoint_merged_weights(const ckpt::Checkpoint& c, const ParamTable& base) {
  std::vector<float> weights(base.numel());
  checkpoint_merged_reader(c, base)(0, static_cast<std::int64_t>(weights.size()), weights.data());
  return weights;
}

namespace {

SavedModel from_checkpoint(const std::string& path) {
  const ckpt::Checkpoint c(path);
  SavedModel m{.path = path, .kind = SavedModel::Kind::kCheckpoint, .config = checkpoint_config(c), .table = checkpoint_base_table(c)};
  const bool lora = m.config.lora.rank > 0;
  m.context = m.table.shape().seq_len;
  m.context_source = cat("model.seq_len=", m.context, " of the checkpoint's run");
  m.source = cat("step ", c.manifest().step, " of checkpoint ", path, lora ? " (LoRA adapters merged into their base)" : "");
  return m;
}

SavedModel from_hf_directory(const std::string& path) {
  config::Config c;
  c.init.from = path;
  c.model.seq_len = config::hf_context_length(path);
  config::apply_hf_config(c, {});
  SavedModel m{.path = path, .kind = SavedModel::Kind::kHuggingFace, .config = c, .table = ParamTable(model_shape(c.model))};
  m.context = c.model.seq_len;
  m.context_source = config::hf_context(path).source;
  m.source = cat("Hugging Face directory ", path, " (", family_of(m.table.shape().arch).describe(m.table.shape()), ")");
  return m;
}

// A PEFT adapter directory (adapter_config.json + adapter_model.safetensors) on the base its
// base_model_name_or_path names: the adapters merged into it, as zckpt export --merge merges a run's.
SavedModel from_peft_adapter(const std::string& path) {
  config::Config c;
  c.init.from = path;
  config::check_peft_base(c);
  c.model.seq_len = config::hf_context_length(path);  // the base's
  config::apply_hf_config(c, {});
  config::apply_adapter_config(c);
  config::check_lora(c);
  SavedModel m{.path = path, .kind = SavedModel::Kind::kPeftAdapter, .config = c, .table = ParamTable(model_shape(c.model))};
  m.context = c.model.seq_len;
  m.context_source = config::hf_context(path).source;  // the base's
  m.source = cat("PEFT adapter ", path, " (rank ", c.lora.rank, ") merged into its base ", config::lora_base_path(c), " (",
                 family_of(m.table.shape().arch).describe(m.table.shape()), ")");
  return m;
}

ReadRange peft_merged_reader(const SavedModel& m) {
  auto merge = std::make_shared<Merge>(m.table, config::lora_base_path(m.config), 0, m.config, false,
                                       lora_table(m.table.shape(), lora_spec(m.config)));
  load_safetensors((fs::path(m.path) / "adapter_model.safetensors").string(), merge->adapters, merge->adapter_values.data());
  return merged_reader(std::move(merge));
}

}  // namespace

ReadRange saved_weights_reader(const SavedModel& m) {
  switch (m.kind) {
    case SavedModel::Kind::kCheckpoint: {
      if (m.config.lora.rank > 0) return checkpoint_merged_reader(ckpt::Checkpoint(m.path), m.table);
      auto c = std::make_shared<const ckpt::Checkpoint>(m.path);
      return [c](std::int64_t offset, std::int64_t count, float* out) {
        c->read(ckpt::StateKind::kMaster, FlatRange{offset, count}, out);
      };
    }
    case SavedModel::Kind::kHuggingFace: {
      auto weights = std::make_shared<const InitialWeights>(m.path, m.table, 0);
      return [weights](std::int64_t offset, std::int64_t count, float* out) { weights->read(offset, count, out); };
    }
    case SavedModel::Kind::kPeftAdapter: return peft_merged_reader(m);
  }
  throw Error("saved_weights_reader: an unknown kind of model");
}

std::size_t saved_weights_reader_bytes(const SavedModel& m) {
  if (!m.merged()) return 0;
  const MergeWhole whole{lora_pair_of(m.table, lora_table(m.table.shape(), lora_spec(m.config))),
                         m.checkpoint() && m.config.lora.base_dtype == config::LoraBaseDtype::kNf4};
  return whole_tensor_bytes(m.table, [&](std::size_t p) { return whole(m.table, p); });
}

SavedModel load_saved_model(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    throw ConfigError(cat(path, ": no such directory (a ztrain checkpoint step_N/ or a Hugging Face model directory)"));
  if (fs::exists(fs::path(path) / ckpt::kManifestFile, ec)) return from_checkpoint(path);
  if (fs::exists(fs::path(path) / "config.json", ec)) return from_hf_directory(path);
  if (fs::exists(fs::path(path) / "adapter_config.json", ec)) return from_peft_adapter(path);
  throw ConfigError(cat(path, " holds neither ", ckpt::kManifestFile, " (a committed ztrain checkpoint), config.json (a "
                        "Hugging Face model directory) nor adapter_config.json (a PEFT adapter)"));
}

}  // namespace zt::model
