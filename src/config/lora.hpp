// LoRA's module names (lora.targets) for either family, as PEFT's target_modules name them, and the
// checks of the lora.* keys against the rest of the configuration.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace zt::config {

// The adapted modules in Hugging Face's names and the family's order (Llama: q_proj, k_proj, v_proj,
// o_proj, gate_proj, up_proj, down_proj; GPT-2: c_attn, c_proj, c_fc), from lora.targets, which may say
// q or q_proj; empty lora.targets gives PEFT's defaults (q_proj, v_proj; c_attn). Throws ConfigError on
// a name the family does not have.
std::vector<std::string> lora_target_modules(const Config& c);

// The scale of the adapter output: alpha / rank, or alpha / sqrt(rank) with lora.rslora.
double lora_scale(const LoraConfig& l);

// init.from may name a PEFT adapter directory (adapter_config.json + adapter_model.safetensors) to go on
// training those adapters: its adapter_config.json's path, or "" when init.from is no such directory.
std::string peft_adapter_config_path(const Config& c);
// The base model a LoRA run sits on: the adapter directory's base_model_name_or_path, else init.from
// ("" = the seed's random init).
std::string lora_base_path(const Config& c);

// init.from a PEFT adapter directory: ConfigError unless its base_model_name_or_path is a local path
// (a Hub id is not downloaded by ztrain). Nothing for any other init.from.
void check_peft_base(const Config& c);

// init.from a PEFT adapter directory: its r, lora_alpha, use_rslora, lora_dropout and target_modules into
// the lora.* keys (after the base's config.json is applied: "all-linear" is the family's modules), for a
// program that runs the adapter rather than trains it (zgen); check_lora then checks the rest.
void apply_adapter_config(Config& c);

// ConfigError when the lora.* keys do not fit the run (throws nothing when lora.rank = 0 and the other
// keys are at their defaults), or disagree with the PEFT adapter init.from names (its r, lora_alpha,
// use_rslora, lora_dropout, target_modules), or that adapter uses a LoraConfig option ztrain does not
// implement (use_dora, bias, modules_to_save, rank_pattern, ...: each refused by name).
void check_lora(const Config& c);

}  // namespace zt::config
