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

// Reads DIR/config.json (LlamaForCausalLM or GPT2LMHeadModel) into config.model: architectures ->
// model.arch, the shape fields, RoPE and norm settings, tie_word_embeddings, each only where its key is
// not in `given`. A given key whose value differs is a ConfigError naming both values. model.seq_len is
// never taken from the file (a shorter context than the model's is a choice); it must not exceed
// max_position_embeddings (n_positions). Must run before validate(), so every check sees the real shape.
void apply_hf_config(Config& config, const std::set<std::string>& given);

// The positions a Hugging Face model directory's model takes as ztrain computes it: config.json's
// max_position_embeddings (Llama family; 2048 when absent) or n_positions (GPT-2; 1024), of a PEFT
// directory's base too; for Mistral at most its sliding_window (within it the window's attention is the
// full causal attention ztrain runs: zgen's and zckpt's context).
std::int64_t hf_context_length(const std::string& dir);

}  // namespace zt::config
