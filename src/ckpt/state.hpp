// What a checkpoint holds, as plain descriptors: the model and optimizer hand ckpt names, shapes,
// flat ranges and host copies of their state (Megatron's ShardedTensor idea); ckpt never sees the
// classes themselves, so the format depends only on the parameter table and the world size.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/flat_range.hpp"

namespace zt::ckpt {

// Elements [offset, offset + numel) of the model's flat fp32 parameter buffer, and their intersection
// (resharding's primitive): the one type optim/ uses too (core/flat_range.hpp).
using zt::FlatRange;
using zt::intersect;

struct ParamDesc {
  std::string name;                    // Hugging Face GPT2LMHeadModel name
  std::vector<std::int64_t> shape;     // in the flat buffer (wte: padded rows included)
  std::vector<std::int64_t> hf_shape;  // as saved in model.h5 (wte: the real vocabulary's rows)
  std::int64_t flat_offset = 0;
  std::int64_t numel() const;          // prod(shape)
  std::int64_t hf_numel() const;       // prod(hf_shape): the first hf_numel elements are real
  bool operator==(const ParamDesc&) const = default;
};

struct ModelDesc {
  // The hyper-parameters a reader needs to rebuild the parameter table (n_layer, n_embd, ...).
  std::vector<std::pair<std::string, std::int64_t>> hyper;
  std::vector<ParamDesc> params;  // in flat order
  std::vector<FlatRange> units;   // what ZeRO shards: each unit is split evenly over the ranks
  std::int64_t flat_numel = 0;
  std::int64_t hyper_value(const std::string& key) const;  // throws CheckpointError if absent
};

enum class StateKind { kMaster, kExpAvg, kExpAvgSq };
constexpr StateKind kStateKinds[] = {StateKind::kMaster, StateKind::kExpAvg, StateKind::kExpAvgSq};
const char* dataset_name(StateKind kind);  // "master", "exp_avg", "exp_avg_sq"

// One rank's fp32 optimizer state in host memory: each vector holds the ranges' elements back to back.
struct RankShard {
  int rank = 0, world_size = 1;
  std::vector<FlatRange> ranges;
  std::vector<float> master, exp_avg, exp_avg_sq;
  std::vector<float>& of(StateKind kind);
  const std::vector<float>& of(StateKind kind) const;
  std::int64_t numel() const;  // the sum of the ranges' numel
};

// fp16 loss scaling (DeepSpeed's fields; train/loss_scaler.hpp): disabled with scale 1 otherwise.
struct LossScaleState {
  bool enabled = false;
  double scale = 1;
  std::int64_t good_steps = 0;     // steps since the last overflow
  std::int64_t skipped_steps = 0;  // overflowed steps so far: AdamW's own step count is step - skipped
};

// One corpus of the training blend (data.train) at the checkpoint's cursor.
struct CorpusCursor {
  std::string glob;
  double weight = 1;                   // normalised over the blend
  std::uint64_t windows_per_epoch = 0;
  std::uint64_t windows_consumed = 0;  // of this corpus since the blend began
  // The shards the glob matched (data::ShardSetPrint): count, tokens and fingerprint; "" in checkpoints
  // written before they were recorded (a resume then compares windows_per_epoch).
  std::uint64_t shards = 0, tokens = 0;
  std::string shards_sha256;
};

struct TrainState {
  std::int64_t step = 0;                 // completed optimizer steps
  std::uint64_t tokens = 0;              // trained on, cumulative
  std::uint64_t windows_consumed = 0;    // the global data cursor (all ranks together)
  std::uint64_t windows_per_epoch = 0;   // to report the cursor as (epoch, window)
  // The corpora of data.train (one for a plain glob); empty in checkpoints written before blends. A
  // resume with other weights is refused unless data.reset_order, which starts the new mix's order at
  // that resume's cursor: blend_start, the global window at which this blend's order began.
  std::vector<CorpusCursor> blend;
  std::uint64_t blend_start = 0;
  std::uint64_t global_batch = 0, seq_len = 0;
  std::uint64_t seed = 0;                // every random stream is counter-based on it: no other RNG state
  LossScaleState loss_scale;
  std::string config_ini;                // the resolved configuration of the run that wrote it
  std::string git_revision;
  // LoRA runs: the checkpoint holds the adapters only; its base is init.from (in config_ini) with the
  // SHA-256 of its fp32 weights here (resume refuses another base). Empty for other runs.
  std::string lora_base_sha256;
  // RL with rl.kl_coef (a full actor): the SHA-256 of the reference's fp32 weights (the initial policy,
  // read from init.from at each start): a resume refuses another. Empty for other runs.
  std::string rl_reference_sha256;
  // A full fine-tune of a Hugging Face directory (init.from): what an export takes from that base beyond
  // the weights (model::base_fingerprint), as at the run's start: an export refuses a base changed since.
  std::string init_from_sha256;
};

// A file of a checkpoint: its path relative to the checkpoint directory, size and SHA-256 (hex).
struct FileRecord {
  std::string path;
  std::uint64_t bytes = 0;
  std::string sha256;
};

// What one rank wrote: its ranges and files, and the seconds the write took (for the bandwidth). A
// checkpoint of several models (PPO: the actor, its critic in critic/) records each further model as a
// part: its subdirectory, its ranges and its files (paths relative to that subdirectory).
struct RankRecord {
  int rank = 0;
  std::vector<FlatRange> ranges;
  std::vector<FileRecord> files;
  double write_s = 0;
  std::string dir;               // a part's subdirectory ("" for the checkpoint's own model)
  std::vector<RankRecord> parts;  // the further models' records
};

constexpr int kFormatVersion = 1;
// MANIFEST.json may be version 2: a rank's ranges then hold strided groups [offset, numel, stride,
// count] (ranges_json). Written only when a group occurs (tensor-parallel shards: one run per matrix
// row), so checkpoints without one stay readable by version-1 readers.
constexpr int kManifestFormatVersion = 2;
inline const char* const kFormat = "ztrain-checkpoint";

struct Manifest {
  int format_version = kFormatVersion;
  std::int64_t step = 0;
  int world_size = 1;
  int zero_stage = 0;
  ModelDesc model;
  std::vector<std::vector<FlatRange>> rank_ranges;  // [world_size]
  std::vector<FileRecord> files;                    // every file but the manifest itself
  std::string run_id;  // the run that wrote it (ownership.hpp); "" in checkpoints made before run ids
  std::uint64_t total_bytes() const;
};

}  // namespace zt::ckpt
