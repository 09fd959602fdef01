// Hugging Face model directories, as transformers' from_pretrained reads and save_pretrained writes
// them: config.json beside model.safetensors, or beside model-0000i-of-0000N.safetensors shards listed
// by model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map": {tensor: file}}).
#pragma once

#include <cstdint>
#include <string>

#include "model/param_table.hpp"
#include "model/safetensors.hpp"

namespace zt::model {

// init.from: a .safetensors file, or a directory (its config.json was applied to the configuration by
// config::apply_hf_config; here only the weights are read). Throws InputError naming the file.
// bitsandbytes NF4 weights are dequantized; `nf4` (optional) receives those stored in the table's layout.
void load_pretrained(const std::string& path, const ParamTable& table, float* host_params, Nf4Weights* nf4 = nullptr);
// The same weights read range by range (SafetensorsReader): what a rank loads of init.from without a
// whole-model copy.
SafetensorsReader open_pretrained(const std::string& path, const ParamTable& table);

// "5GB", "500MB", "2GiB", "1000" (bytes) as transformers' max_shard_size: GB/MB/KB are powers of 1000,
// GiB/MiB/KiB powers of 1024. Throws ConfigError naming the text.
std::uint64_t parse_shard_size(const std::string& text);

// Writes dir/config.json (torch_dtype bfloat16 or float32) and the weights, F32 or BF16: one
// model.safetensors when they fit in max_shard_bytes, else shards of at most that size (a tensor larger
// than it gets a shard of its own, as transformers does) plus the index. Names sorted; identical weights
// give identical bytes. Throws IoError.
void export_hf_directory(const std::string& dir, const ParamTable& table, const float* host_params, bool bf16,
                         std::uint64_t max_shard_bytes);

}  // namespace zt::model
