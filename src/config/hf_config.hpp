// init.from=DIR, a Hugging Face model directory: its config.json supplies the [model] keys the command
// line and the config file left out, and contradicts none of those they gave.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "config/config.hpp"

namespace zt::config {

// True when init.from names a directory (a Hugging Face model directory, not a .safetensors file).
bool is_hf_directory(const std::string& path);
// True when `path` has a config.json to read: a directory (which must hold one), or a .safetensors file
// with config.json beside it (what zckpt export --out FILE.safetensors writes, and a model directory's
// own file): its RoPE, norm epsilon and head width are the file's model's, not ztrain's defaults.
bool has_config_json(const std::string& path);
// The directory whose config.json (and tokenizer and generation files) describe `path`: `path` itself
// or a .safetensors file's directory; "" when has_config_json(path) is false.
std::string hf_config_dir(const std::string& path);

// Reads DIR/config.json (LlamaForCausalLM or GPT2LMHeadModel) into config.model: architectures ->
// model.arch, the shape fields, RoPE and norm settings, tie_word_embeddings, each only where its key is
// not in `given`. A given key whose value differs is a ConfigError naming both values. model.seq_len is
// never taken from the file (a shorter context than the model's is a choice); it must not exceed
// max_position_embeddings (n_positions). Must run before validate(), so every check sees the real shape.
void apply_hf_config(Config& config, const std::set<std::string>& given);

// A Hugging Face model directory's (or a PEFT directory's base's) architecture, its positions
// (config.json's max_position_embeddings or GPT-2's n_positions, else transformers' default for the
// class: Llama 2048, Mistral 131072, Qwen2/Qwen3 32768, GPT-2 1024) and Mistral's sliding window (0: none).
struct HfContext {
  std::string architecture;  // "MistralForCausalLM"
  std::int64_t positions = 0;
  std::int64_t window = 0;
  // Where the context comes from, for messages: "n_positions=1024 in D/config.json", "sliding_window=24 in
  // D/config.json, below its max_position_embeddings=128: ...".
  std::string source;
};
HfContext hf_context(const std::string& dir);

// The positions its model takes as ztrain computes it: for Mistral at most its sliding_window (within
// it the window's attention is the full causal attention ztrain runs: zgen's and zckpt's context).
std::int64_t hf_context_length(const std::string& dir);

}  // namespace zt::config
