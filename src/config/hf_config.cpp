// config.json -> [model] keys (see hf_config.hpp). Field names and defaults are transformers'
// LlamaConfig (MistralConfig and Qwen2Config share them) and GPT2Config: a field the file leaves out
// takes the value transformers would give it. Mistral is Llama's block with a sliding attention window,
// loaded when the window does not bind at model.seq_len; Qwen2 is Llama's block with biases on q, k, v.
#include "config/hf_config.hpp"
#include "config/lora.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "config/options.hpp"
#include "core/error.hpp"

namespace zt::config {
namespace {

struct Field {
  std::string key;   // ours: model.n_head
  std::string name;  // config.json's: num_attention_heads
  std::string text;  // the value as our option table reads it
};

std::string text_of(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

// The field `name`, or `fallback` (transformers' default) when absent; "" fallback: required.
std::string value(const nlohmann::json& c, const std::string& file, const std::string& name,
                  const std::string& fallback = "") {
  if (c.contains(name) && !c[name].is_null()) return text_of(c[name]);
  if (fallback.empty()) throw ConfigError(cat(file, ": has no \"", name, "\"; it is not a complete model config.json"));
  return fallback;
}

std::vector<Field> rope_fields(const nlohmann::json& c, const std::string& file) {
  if (!c.contains("rope_scaling") || c["rope_scaling"].is_null()) return {{"model.rope_scaling", "rope_scaling", "none"}};
  const nlohmann::json& r = c["rope_scaling"];
  const std::string type = r.value("rope_type", r.value("type", std::string()));
  if (type != "llama3")
    throw ConfigError(cat(file, ": rope_scaling type '", type, "' is not supported; ztrain implements llama3 or none"));
  return {{"model.rope_scaling", "rope_scaling.rope_type", "llama3"},
          {"model.rope_factor", "rope_scaling.factor", value(r, file, "factor")},
          {"model.rope_low_freq_factor", "rope_scaling.low_freq_factor", value(r, file, "low_freq_factor")},
          {"model.rope_high_freq_factor", "rope_scaling.high_freq_factor", value(r, file, "high_freq_factor")},
          {"model.rope_original_max_position", "rope_scaling.original_max_position_embeddings",
           value(r, file, "original_max_position_embeddings")}};
}

// What ztrain's Llama and GPT-2 blocks cannot compute: refused by name rather than loaded wrong.
void check_supported(const nlohmann::json& c, const std::string& file, bool llama) {
  auto refuse = [&](const std::string& what) {
    throw ConfigError(cat(file, ": ", what, "; ztrain's ", llama ? "Llama" : "GPT-2", " block cannot load this model"));
  };
  if (llama) {
    if (value(c, file, "hidden_act", "silu") != "silu") refuse("hidden_act is " + value(c, file, "hidden_act"));
    for (const char* bias : {"attention_bias", "mlp_bias"})  // Llama's: on all four projections, or the MLP's
      if (value(c, file, bias, "false") != "false") refuse(cat(bias, " is true"));
    if (value(c, file, "use_sliding_window", "false") != "false")  // Qwen2's, on its upper layers
      refuse("use_sliding_window is true (attention windowed on some layers)");
    const std::int64_t width = std::stoll(value(c, file, "hidden_size")), heads = std::stoll(value(c, file, "num_attention_heads"));
    if (heads > 0 && c.contains("head_dim") && !c["head_dim"].is_null() && c["head_dim"].get<std::int64_t>() * heads != width)
      refuse(cat("head_dim=", c["head_dim"].dump(), " is not hidden_size/num_attention_heads"));
  } else if (c.contains("n_inner") && !c["n_inner"].is_null() &&
             c["n_inner"].get<std::int64_t>() != 4 * std::stoll(value(c, file, "n_embd"))) {
    refuse(cat("n_inner=", c["n_inner"].dump(), " is not 4 n_embd"));
  }
}

std::vector<Field> llama_fields(const nlohmann::json& c, const std::string& file, const std::string& arch) {
  const std::string heads = value(c, file, "num_attention_heads");
  std::vector<Field> f = {
      {"model.arch", "architectures", "llama"},
      {"model.qkv_bias", "architectures", arch == "Qwen2ForCausalLM" ? "true" : "false"},
      {"model.n_layer", "num_hidden_layers", value(c, file, "num_hidden_layers")},
      {"model.n_head", "num_attention_heads", heads},
      {"model.n_kv_head", "num_key_value_heads", value(c, file, "num_key_value_heads", heads)},
      {"model.n_embd", "hidden_size", value(c, file, "hidden_size")},
      {"model.ffn_hidden", "intermediate_size", value(c, file, "intermediate_size")},
      {"model.vocab_size", "vocab_size", value(c, file, "vocab_size")},
      {"model.rope_theta", "rope_theta", value(c, file, "rope_theta", "10000")},
      {"model.norm_eps", "rms_norm_eps", value(c, file, "rms_norm_eps", "1e-6")},
      {"model.tie_embeddings", "tie_word_embeddings", value(c, file, "tie_word_embeddings", "false")}};
  for (Field& r : rope_fields(c, file)) f.push_back(std::move(r));
  return f;
}

std::vector<Field> gpt2_fields(const nlohmann::json& c, const std::string& file) {
  if (value(c, file, "tie_word_embeddings", "true") != "true")
    throw ConfigError(cat(file, ": tie_word_embeddings is false; ztrain's GPT-2 always ties the LM head to wte"));
  return {{"model.arch", "architectures", "gpt2"},
          {"model.n_layer", "n_layer", value(c, file, "n_layer")},
          {"model.n_head", "n_head", value(c, file, "n_head")},
          {"model.n_embd", "n_embd", value(c, file, "n_embd")},
          {"model.vocab_size", "vocab_size", value(c, file, "vocab_size")}};
}

nlohmann::json read_json(const std::string& file) {
  std::ifstream in(file);
  if (!in)
    throw ConfigError(cat("init.from: ", file, " cannot be read; a Hugging Face model directory holds config.json ",
                          "beside its safetensors (or give init.from=FILE.safetensors)"));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(cat(file, ": not valid JSON (", e.what(), ")"));
  }
}

std::string architecture(const nlohmann::json& c, const std::string& file) {
  if (c.contains("architectures") && c["architectures"].is_array() && !c["architectures"].empty())
    return text_of(c["architectures"][0]);
  const std::string type = value(c, file, "model_type");  // older files name only the type
  if (type == "llama") return "LlamaForCausalLM";
  if (type == "mistral") return "MistralForCausalLM";
  if (type == "qwen2") return "Qwen2ForCausalLM";
  return type == "gpt2" ? "GPT2LMHeadModel" : type;
}

// The block families ztrain's Llama computes: Llama itself, Mistral (its window checked against
// model.seq_len after the keys are applied) and Qwen2 (model.qkv_bias).
bool llama_block(const std::string& arch) {
  return arch == "LlamaForCausalLM" || arch == "MistralForCausalLM" || arch == "Qwen2ForCausalLM";
}

// Given keys must agree; a given tie_embeddings=auto agrees with either.
void apply(Config& config, const std::set<std::string>& given, const Field& f, const std::string& file) {
  const Option* o = find_option(f.key);
  Config probe = config;
  try {
    o->assign(probe, f.text);
  } catch (const ConfigError& e) {
    throw ConfigError(cat(file, ": ", f.name, "=", f.text, " is not a valid ", f.key, " (", e.what(), ")"));
  }
  if (!given.count(f.key)) return static_cast<void>(config = probe);
  const std::string mine = o->format(config), theirs = o->format(probe);
  if (mine != theirs && !(f.key == "model.tie_embeddings" && mine == "auto"))
    throw ConfigError(cat(f.key, "=", mine, " disagrees with ", f.name, "=", f.text, " in ", file,
                          ": drop ", f.key, " to take the model's value, or start from another model"));
}

}  // namespace

bool is_hf_directory(const std::string& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::is_directory(path, ec);
}

void apply_hf_config(Config& config, const std::set<std::string>& given) {
  // A PEFT adapter directory in init.from: the model is its base's (config/lora.hpp).
  const std::string file = (std::filesystem::path(lora_base_path(config)) / "config.json").string();
  const nlohmann::json c = read_json(file);
  const std::string arch = architecture(c, file);
  const bool llama = llama_block(arch);
  if (!llama && arch != "GPT2LMHeadModel")
    throw ConfigError(cat(file, ": architecture ", arch, " is not supported; ztrain loads LlamaForCausalLM, ",
                          "MistralForCausalLM, Qwen2ForCausalLM or GPT2LMHeadModel"));
  check_supported(c, file, llama);
  for (const Field& f : llama ? llama_fields(c, file, arch) : gpt2_fields(c, file)) apply(config, given, f, file);
  const std::string positions = llama ? "max_position_embeddings" : "n_positions";
  const std::int64_t max_len = std::stoll(value(c, file, positions, llama ? "2048" : "1024"));
  if (config.model.seq_len > max_len)
    throw ConfigError(cat("model.seq_len=", config.model.seq_len, " exceeds ", positions, "=", max_len, " in ", file,
                          ": give model.seq_len <= ", max_len));
  // Mistral attends within a window of sliding_window tokens (transformers' default 4096; null: none);
  // at model.seq_len <= the window that is full causal attention, which ztrain computes.
  if (arch == "MistralForCausalLM") {
    const bool none = c.contains("sliding_window") && c["sliding_window"].is_null();
    const std::int64_t window = none ? 0 : std::stoll(value(c, file, "sliding_window", "4096"));
    if (window > 0 && config.model.seq_len > window)
      throw ConfigError(cat("model.seq_len=", config.model.seq_len, " exceeds sliding_window=", window, " in ", file,
                            ": ztrain's attention is full causal, the same as the window only up to it; give "
                            "model.seq_len <= ", window));
  }
}

}  // namespace zt::config
