// config.json -> [model] keys (see hf_config.hpp). Field names and defaults are transformers'
// LlamaConfig (MistralConfig and Qwen2Config share them) and GPT2Config: a field the file leaves out
// takes the value transformers would give it. Mistral is Llama's block with a sliding attention window,
// loaded when the window does not bind at model.seq_len; Qwen2 is Llama's block with biases on q, k, v;
// Qwen3 is Llama's block with an RMSNorm over each q and k head before RoPE (model.qk_norm) and a head
// width of its own (head_dim: model.head_dim).
// Every field that changes the function the model computes is either read into a [model] key, or
// checked against the one value ztrain's block computes (the tables below), or refused: none is ignored.
#include "config/hf_config.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <vector>

#include "config/json_fields.hpp"
#include "config/lora.hpp"
#include "config/options.hpp"
#include "config/value.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace zt::config {
namespace {

constexpr const char* kIncomplete = "it is not a complete model config.json";

struct Field {
  std::string key;   // ours: model.n_head
  std::string name;  // config.json's: num_attention_heads
  std::string text;  // the value as our option table reads it
  std::string shown = "";  // the file's value for messages where it is not `text` (architectures' class name)
};

// A config.json field that changes the function, of which ztrain's block computes only the values in
// `computes` (JSON text; numbers compared as numbers): any other is refused naming key, value and this.
enum class Kind { kString, kBool, kNumber };
struct Fixed {
  const char* name;
  Kind kind;
  const char* fallback;               // transformers' default, when the file leaves the field out
  std::vector<const char*> computes;  // the values ztrain's block computes
  const char* what;                   // what that is, for the message
};

// GPT2Config's fields (transformers' configuration_gpt2.py) beyond the shape (`what` says what the block
// computes in words; the message adds the field's values) (read into [model] keys),
// the context (n_positions) and n_inner (checked against 4 n_embd below).
const std::vector<Fixed>& gpt2_fixed() {
  static const std::vector<Fixed> kFixed = {
      // gelu_fast and gelu_pytorch_tanh are gelu_new's tanh formula (sqrt(2/pi) rounded to 10 digits, PyTorch's kernel)
      {"activation_function", Kind::kString, "gelu_new", {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"},
       "GELU's tanh approximation (gelu_new)"},
      {"layer_norm_epsilon", Kind::kNumber, "1e-5", {"1e-5"}, "LayerNorm with epsilon 1e-5"},
      {"scale_attn_weights", Kind::kBool, "true", {"true"}, "attention scores divided by sqrt(head size)"},
      {"scale_attn_by_inverse_layer_idx", Kind::kBool, "false", {"false"},
       "attention scores not divided by the layer index"},
      {"add_cross_attention", Kind::kBool, "false", {"false"}, "a decoder without cross-attention"},
      {"tie_word_embeddings", Kind::kBool, "true", {"true"}, "an LM head tied to wte"},
      // Only where the attention is computed in what precision: the same function either way.
      {"reorder_and_upcast_attn", Kind::kBool, "false", {"false", "true"}, ""},
  };
  return kFixed;
}

// LlamaConfig's (and Mistral's, Qwen2's) beyond the shape, RoPE, norm and tie fields read into [model] keys.
const std::vector<Fixed>& llama_fixed() {
  static const std::vector<Fixed> kFixed = {
      {"hidden_act", Kind::kString, "silu", {"silu"}, "SwiGLU with SiLU"},
      {"attention_bias", Kind::kBool, "false", {"false"},
       "no biases on q, k, v, o (Qwen2ForCausalLM's q, k, v biases are model.qkv_bias)"},
      {"mlp_bias", Kind::kBool, "false", {"false"}, "no biases in the MLP"},
      {"use_sliding_window", Kind::kBool, "false", {"false"},
       "full causal attention on every layer"},
      // Splits the matmuls into slices in transformers: the same function.
      {"pretraining_tp", Kind::kNumber, "1", {}, ""},
      // RoPE over a part of each head (some configs, and transformers v5's rope_parameters, which is refused
      // the same way): ztrain rotates every channel pair (outside sweep 31 F1: silently ignored).
      {"partial_rotary_factor", Kind::kNumber, "1", {"1"}, "RoPE over the whole head"},
  };
  return kFixed;
}

// Dropout is a training-time choice: ztrain trains the base model without it (as llm.c and nanoGPT do
// when fine-tuning), so the function the loaded model computes is the same; said, not ignored.
const std::vector<const char*>& dropout_fields(bool llama) {
  static const std::vector<const char*> kGpt2 = {"attn_pdrop", "resid_pdrop", "embd_pdrop"}, kLlama = {"attention_dropout"};
  return llama ? kLlama : kGpt2;
}

std::string list(const std::vector<const char*>& values) {
  std::string out;
  for (const char* v : values) out += cat(out.empty() ? "" : ", ", v);
  return out;
}

// A number field as its JSON text (type checked), or `fallback` when absent (null: required).
std::string number_text(const JsonFields& c, const std::string& name, const char* fallback = nullptr) {
  if (!c.has(name) && fallback) return fallback;
  c.number(name);  // throws when absent or not a number
  return c.text(name);
}

// The field's value as JSON text, after checking its type.
std::string checked_text(const JsonFields& c, const Fixed& f) {
  switch (f.kind) {
    case Kind::kString: return c.string(f.name, f.fallback);
    case Kind::kBool: return c.boolean(f.name, std::string(f.fallback) == "true") ? "true" : "false";
    case Kind::kNumber: return number_text(c, f.name, f.fallback);
  }
  return "";
}

bool computes(const Fixed& f, const std::string& text) {
  if (f.computes.empty()) return true;  // any value: the same function
  for (const char* v : f.computes)
    if (f.kind == Kind::kNumber ? std::stod(text) == std::stod(v) : text == v) return true;
  return false;
}

// A pre-quantized directory loads when it is bitsandbytes' 4-bit NF4 (what `zckpt quantize` writes, and the
// Hub's "-bnb-4bit" models): its weights are dequantized at load, or taken as they are for an NF4 LoRA base
// (model/bnb_nf4.hpp). Any other scheme is refused naming it.
void check_quantization(const JsonFields& q) {
  const std::string method = q.string("quant_method", std::string("?"));
  const bool four_bit = q.boolean("load_in_4bit", false), eight_bit = q.boolean("load_in_8bit", false);
  const std::string type = q.string("bnb_4bit_quant_type", std::string("fp4"));
  if (method == "bitsandbytes" && four_bit && !eight_bit && type == "nf4") return;
  throw ConfigError(cat(q.file(), ": quantization_config ", method == "bitsandbytes" ? cat("(bitsandbytes, ", eight_bit ? "8-bit" : cat("4-bit ", type), ")")
                                                                                     : cat("(quant_method ", method, ")"),
                        ": ztrain loads F32, BF16 or F16 weights, or bitsandbytes' 4-bit NF4 (load_in_4bit with "
                        "bnb_4bit_quant_type nf4); give the model's unquantized checkpoint, or quantize it with zckpt quantize"));
}

void check_fixed(const JsonFields& c, bool llama) {
  const char* family = llama ? "Llama" : "GPT-2";
  for (const Fixed& f : llama ? llama_fixed() : gpt2_fixed()) {
    const std::string text = checked_text(c, f);
    if (!computes(f, text))
      throw ConfigError(cat(c.file(), ": ", f.name, "=", text, ": ztrain's ", family, " block computes ", f.what,
                            " (", f.name, " ", list(f.computes), "), so it cannot load this model"));
  }
  if (c.has("quantization_config")) check_quantization(c.object("quantization_config"));
  std::string dropouts;
  for (const char* name : dropout_fields(llama))
    if (c.number(name, 0.0) != 0) dropouts += cat(dropouts.empty() ? "" : ", ", name, "=", c.text(name));
  if (!dropouts.empty())
    log::warn(cat(c.file(), ": ", dropouts, ": ztrain trains ", family, " without dropout (lora.dropout is the "
                  "adapters'); the loaded model computes the same function"));
}

void check_shape_fields(const JsonFields& c, bool llama) {
  auto refuse = [&](const std::string& what) {
    throw ConfigError(cat(c.file(), ": ", what, "; ztrain's ", llama ? "Llama" : "GPT-2", " block cannot load this model"));
  };
  if (llama) {  // head_dim: read into model.head_dim (llama_fields)
    if (c.has("head_dim") && c.integer("head_dim") % 2 != 0)
      refuse(cat("head_dim=", c.text("head_dim"), " is odd, and RoPE rotates pairs of channels"));
  } else if (c.has("n_inner") && c.integer("n_inner") != 4 * c.integer("n_embd")) {
    refuse(cat("n_inner=", c.text("n_inner"), " is not 4 n_embd = ", 4 * c.integer("n_embd"),
               " (ztrain's GPT-2 MLP is 4 n_embd wide)"));
  }
}

std::string int_text(const JsonFields& c, const std::string& name, std::optional<std::int64_t> fallback = {}) {
  return std::to_string(c.integer(name, fallback));
}

// The scaling of a rope_scaling (v4) or rope_parameters (v5) object `r`: its type (rope_type, or v4's
// older "type"), and llama3's four numbers.
std::vector<Field> scaling_fields(const JsonFields& r, bool empty_object = false) {
  if (empty_object)  // transformers v4 fails on it (no rope_type): null is "no scaling"
    throw ConfigError(cat(r.file(), ": ", r.path("").substr(0, r.path("").size() - 1), " is an empty object; give null (or {\"rope_type\": \"default\"}) "
                          "for no scaling, or llama3's rope_type, factor, low_freq_factor, high_freq_factor and "
                          "original_max_position_embeddings"));
  const std::string type = r.string("rope_type", r.string("type", "default"));
  // transformers' "default" is the unscaled rotation, as a null rope_scaling
  if (type == "default") return {{"model.rope_scaling", r.path("rope_type"), "none"}};
  if (type != "llama3")
    throw ConfigError(cat(r.file(), ": ", r.path("rope_type"), " '", type,
                          "' is not supported; ztrain implements llama3 or none (null or \"default\")"));
  if (r.number("high_freq_factor") <= r.number("low_freq_factor"))
    throw ConfigError(cat(r.file(), ": ", r.path("high_freq_factor"), "=", r.text("high_freq_factor"), " must be above ",
                          r.path("low_freq_factor"), "=", r.text("low_freq_factor"), " (Llama 3.1: 4 and 1): the "
                          "llama3 scaling blends between the two wavelengths they set"));
  // An integral number written as a float (16.0) is the integer transformers divides by.
  const double original = r.number("original_max_position_embeddings");
  if (original != std::floor(original) || original < 1 || original > 1e15)
    throw ConfigError(cat(r.file(), ": ", r.path("original_max_position_embeddings"), "=",
                          r.text("original_max_position_embeddings"), " is not a whole number of positions"));
  return {{"model.rope_scaling", r.path("rope_type"), "llama3"},
          {"model.rope_factor", r.path("factor"), number_text(r, "factor")},
          {"model.rope_low_freq_factor", r.path("low_freq_factor"), number_text(r, "low_freq_factor")},
          {"model.rope_high_freq_factor", r.path("high_freq_factor"), number_text(r, "high_freq_factor")},
          {"model.rope_original_max_position", r.path("original_max_position_embeddings"),
           std::to_string(static_cast<std::int64_t>(original))}};
}

// transformers v5 writes RoPE as one object, `"rope_parameters": {"rope_theta": 500000.0, "rope_type":
// "llama3", "factor": 8.0, ...}`, and no top-level rope_theta / rope_scaling (v4's, still read). Only
// the keys of the types ztrain computes are taken; a per-layer-type object (Gemma 3's: an object per
// attention kind) or any other key is refused naming it, as a RoPE not read would be a silently other model.
void check_rope_parameters(const nlohmann::json& p, const JsonFields& r) {
  static const std::set<std::string> kKnown = {"rope_theta", "rope_type", "type", "factor", "low_freq_factor",
                                               "high_freq_factor", "original_max_position_embeddings"};
  for (const auto& [key, value] : p.items()) {
    if (value.is_object())
      throw ConfigError(cat(r.file(), ": ", r.path(key), " is an object: RoPE per layer type is not supported; ztrain "
                            "rotates every layer alike (one rope_theta, llama3 scaling or none)"));
    if (key == "partial_rotary_factor" && value.is_number() && value.get<double>() == 1.0) continue;
    if (!kKnown.count(key))
      throw ConfigError(cat(r.file(), ": ", r.path(key), "=", value.dump(), " is not supported; ztrain's RoPE takes "
                            "rope_theta, and rope_type default or llama3 (factor, low_freq_factor, high_freq_factor, "
                            "original_max_position_embeddings)"));
  }
}

// RoPE's base and scaling, from v4's top-level keys or v5's rope_parameters (both present: they must
// agree). Any other top-level rope_* key is refused naming it.
std::vector<Field> rope_fields(const nlohmann::json& j, const JsonFields& c) {
  for (const auto& [key, value] : j.items())
    if (key.rfind("rope", 0) == 0 && key != "rope_theta" && key != "rope_scaling" && key != "rope_parameters" && !value.is_null())
      throw ConfigError(cat(c.file(), ": ", key, "=", value.dump(), " is not supported; ztrain's RoPE takes rope_theta "
                            "and rope_scaling (transformers v4) or rope_parameters (v5)"));
  std::vector<Field> v4 = {{"model.rope_theta", "rope_theta", number_text(c, "rope_theta", "10000")}};
  if (c.has("rope_scaling")) {
    for (Field& f : scaling_fields(c.object("rope_scaling"), j.at("rope_scaling").empty())) v4.push_back(std::move(f));
  } else {
    v4.push_back({"model.rope_scaling", "rope_scaling", "none"});
  }
  if (!c.has("rope_parameters")) return v4;
  const JsonFields r = c.object("rope_parameters");
  check_rope_parameters(j.at("rope_parameters"), r);
  std::vector<Field> v5 = {{"model.rope_theta", r.path("rope_theta"),
                            r.has("rope_theta") ? number_text(r, "rope_theta") : v4.front().text}};
  for (Field& f : scaling_fields(r)) v5.push_back(std::move(f));
  for (const Field& old : v4) {  // what v4's keys say, where the file has them, is what rope_parameters says
    if (!c.has(old.name.substr(0, old.name.find('.')))) continue;
    const auto same = std::find_if(v5.begin(), v5.end(), [&](const Field& f) { return f.key == old.key; });
    const Option* o = find_option(old.key);
    Config a, b;
    o->assign(a, old.text);
    if (same != v5.end()) o->assign(b, same->text);
    if (same == v5.end() || o->format(a) != o->format(b))
      throw ConfigError(cat(c.file(), ": ", old.name, "=", old.text, " disagrees with ",
                            same == v5.end() ? r.path("rope_type") + " " + v5[1].text : cat(same->name, "=", same->text),
                            ": the file holds RoPE twice, differently; keep one (transformers v5 reads rope_parameters)"));
  }
  return v5;
}

// head_dim: transformers' LlamaConfig and Qwen2Config default to hidden_size / num_attention_heads (0 here:
// the same), Qwen3Config to 128.
std::vector<Field> llama_fields(const nlohmann::json& j, const JsonFields& c, const std::string& arch) {
  // null is "the default" for most fields (head_dim, num_key_value_heads); for these transformers keeps
  // the None and fails on it, so a file with one is not a model it loads.
  for (const char* key : {"rms_norm_eps", "rope_theta"})
    if (j.contains(key) && j.at(key).is_null())
      throw ConfigError(cat(c.file(), ": ", key, " is null; give its number (transformers cannot run the model without it)"));
  const std::int64_t heads = c.integer("num_attention_heads");
  const bool qwen3 = arch == "Qwen3ForCausalLM";
  const std::int64_t head_dim = c.integer("head_dim", qwen3 ? 128 : 0);
  const bool own_width = head_dim != 0 && head_dim * heads != c.integer("hidden_size");
  std::vector<Field> f = {
      {"model.arch", "architectures", "llama", arch},
      {"model.qkv_bias", "architectures", arch == "Qwen2ForCausalLM" ? "true" : "false", arch},
      {"model.qk_norm", "architectures", qwen3 ? "true" : "false", arch},
      {"model.head_dim", "head_dim", std::to_string(own_width ? head_dim : 0)},
      {"model.n_layer", "num_hidden_layers", int_text(c, "num_hidden_layers")},
      {"model.n_head", "num_attention_heads", std::to_string(heads)},
      {"model.n_kv_head", "num_key_value_heads", int_text(c, "num_key_value_heads", heads)},
      {"model.n_embd", "hidden_size", int_text(c, "hidden_size")},
      {"model.ffn_hidden", "intermediate_size", int_text(c, "intermediate_size")},
      {"model.vocab_size", "vocab_size", int_text(c, "vocab_size")},
      {"model.norm_eps", "rms_norm_eps", number_text(c, "rms_norm_eps", "1e-6")},
      {"model.tie_embeddings", "tie_word_embeddings", c.boolean("tie_word_embeddings", false) ? "true" : "false"}};
  for (Field& r : rope_fields(j, c)) f.push_back(std::move(r));
  return f;
}

std::vector<Field> gpt2_fields(const JsonFields& c) {
  return {{"model.arch", "architectures", "gpt2", "GPT2LMHeadModel"},
          {"model.n_layer", "n_layer", int_text(c, "n_layer")},
          {"model.n_head", "n_head", int_text(c, "n_head")},
          {"model.n_embd", "n_embd", int_text(c, "n_embd")},
          {"model.vocab_size", "vocab_size", int_text(c, "vocab_size")}};
}

// The block families ztrain's Llama computes: Llama itself, Mistral (its window checked against
// model.seq_len after the keys are applied), Qwen2 (model.qkv_bias) and Qwen3 (model.qk_norm, head_dim).
bool llama_block(const std::string& arch) {
  return arch == "LlamaForCausalLM" || arch == "MistralForCausalLM" || arch == "Qwen2ForCausalLM" ||
         arch == "Qwen3ForCausalLM";
}

// The class transformers' AutoModelForCausalLM builds for a model_type ztrain knows; "" for another.
std::string class_of_model_type(const std::string& type) {
  if (type == "llama") return "LlamaForCausalLM";
  if (type == "mistral") return "MistralForCausalLM";
  if (type == "qwen2") return "Qwen2ForCausalLM";
  if (type == "qwen3") return "Qwen3ForCausalLM";
  return type == "gpt2" ? "GPT2LMHeadModel" : "";
}

// architectures[0], else (older files name only the type) model_type's class. When both name classes
// ztrain knows they must agree: transformers builds model_type's class and vLLM architectures', so a
// file where they differ (a Llama class with Mistral's window, or with Qwen2's biases in the file) means
// two functions (exit 2 naming both).
std::string architecture(const JsonFields& c) {
  const std::string type = c.has("model_type") ? c.string("model_type") : "";
  const std::string typed = class_of_model_type(type);
  if (c.has("architectures")) {
    const std::vector<std::string> names = c.strings("architectures");
    if (!names.empty()) {
      const std::string& named = names.front();
      if (!typed.empty() && (llama_block(named) || named == "GPT2LMHeadModel") && typed != named)
        throw ConfigError(cat(c.file(), ": model_type \"", type, "\" is transformers' ", typed, " but architectures names ",
                              named, ": transformers builds the first and vLLM the second, other functions; "
                              "make the two agree (the class the weights were trained as)"));
      return named;
    }
  }
  return typed.empty() ? type : typed;
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
    throw ConfigError(cat(f.key, "=", mine, " disagrees with ", f.name, "=", f.shown.empty() ? f.text : f.shown, " in ", file,
                          ": drop ", f.key, " to take the model's value, or start from another model"));
}

// Mistral attends within a window of sliding_window tokens (transformers' default 4096; null: none; 0
// where it has none).
std::int64_t mistral_window(const nlohmann::json& j, const JsonFields& c) {
  const bool none = j.contains("sliding_window") && j["sliding_window"].is_null();
  return none ? 0 : c.integer("sliding_window", 4096);
}

// At model.seq_len <= the window that is full causal attention, which ztrain computes.
void check_window(const Config& config, const nlohmann::json& j, const JsonFields& c) {
  const std::int64_t window = mistral_window(j, c);
  if (window > 0 && config.model.seq_len > window)
    throw ConfigError(cat("model.seq_len=", config.model.seq_len, " exceeds sliding_window=", window, " in ", c.file(),
                          ": ztrain's attention is full causal, the same as the window only up to it; give "
                          "model.seq_len <= ", window));
}

}  // namespace

bool is_hf_directory(const std::string& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::is_directory(path, ec);
}

bool has_config_json(const std::string& path) {
  std::error_code ec;
  if (path.empty()) return false;
  const std::filesystem::path p(path);
  if (std::filesystem::is_directory(p, ec)) return true;
  return std::filesystem::is_regular_file(p, ec) && std::filesystem::exists(p.parent_path() / "config.json", ec);
}

std::string hf_config_dir(const std::string& path) {
  if (!has_config_json(path)) return "";
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) ? path : std::filesystem::path(path).parent_path().string();
}

namespace {
// init.from's config.json (a PEFT adapter directory's: its base's, config/lora.hpp): in the directory, or
// beside the .safetensors file (zckpt export --out FILE.safetensors writes it there).
std::string config_json_of(const Config& config) {
  const std::filesystem::path base(lora_base_path(config));
  std::error_code ec;
  const bool file = std::filesystem::is_regular_file(base, ec);
  return ((file ? base.parent_path() : base) / "config.json").string();
}
nlohmann::json read_config_json(const std::string& file) {
  return read_json_object(file, "init.from's config.json (a Hugging Face model directory holds config.json beside its "
                                "safetensors; or give init.from=FILE.safetensors)");
}
// The positions the model takes: the file's, else transformers' default for its class (LlamaConfig
// 2048, MistralConfig 4096 x 32, Qwen2Config and Qwen3Config 32768, GPT2Config's n_positions 1024).
std::int64_t context_length(const JsonFields& c, const std::string& arch) {
  if (!llama_block(arch)) return c.integer("n_positions", 1024);
  const std::int64_t fallback = arch == "MistralForCausalLM" ? 131072
                                : arch == "Qwen2ForCausalLM" || arch == "Qwen3ForCausalLM" ? 32768 : 2048;
  return c.integer("max_position_embeddings", fallback);
}

struct ConfigJson {
  std::string file;
  nlohmann::json j;
};
ConfigJson config_json_in(const std::string& dir) {
  Config config;
  config.init.from = dir;
  std::string file = config_json_of(config);
  nlohmann::json j = read_config_json(file);
  return {std::move(file), std::move(j)};
}
}  // namespace

std::int64_t hf_context_length(const std::string& dir) {
  const HfContext context = hf_context(dir);
  return context.window > 0 ? std::min(context.positions, context.window) : context.positions;
}

HfContext hf_context(const std::string& dir) {
  const ConfigJson f = config_json_in(dir);
  const JsonFields c(f.j, f.file, kIncomplete);
  const std::string arch = architecture(c);
  HfContext h{arch, context_length(c, arch), arch == "MistralForCausalLM" ? mistral_window(f.j, c) : 0, ""};
  const std::string key = llama_block(arch) ? "max_position_embeddings" : "n_positions";
  const std::string positions = cat(key, "=", h.positions, c.has(key) ? "" : " (its default: none given)");
  h.source = h.window > 0 && h.window < h.positions
                 ? cat("sliding_window=", h.window, " in ", f.file, ", below its ", positions,
                       ": the full causal attention ztrain runs is the window's only up to it")
                 : cat(positions, " in ", f.file);
  return h;
}

// config.json's intermediate_size is the width (model.ffn_hidden): Llama's rule keys (ffn_multiplier,
// ffn_multiple_of, from an INI written for training from scratch) that give the same width are
// redundant and dropped; others disagree with the file (outside sweep 30 F2: they were refused as if
// the user had given ffn_hidden).
void take_ffn_width(Config& config, const std::string& file) {
  ModelConfig& m = config.model;
  const ModelConfig d;
  if (m.ffn_multiplier == d.ffn_multiplier && m.ffn_multiple_of == d.ffn_multiple_of) return;
  const int rule = llama_ffn_hidden(static_cast<int>(m.n_embd), m.ffn_multiplier, static_cast<int>(m.ffn_multiple_of));
  if (rule != m.ffn_hidden)
    throw ConfigError(cat("model.ffn_multiplier=", m.ffn_multiplier, " and model.ffn_multiple_of=", m.ffn_multiple_of,
                          " give a SwiGLU width of ", rule, ", but intermediate_size=", m.ffn_hidden, " in ", file,
                          ": drop them (the directory's width is taken)"));
  m.ffn_multiplier = d.ffn_multiplier, m.ffn_multiple_of = d.ffn_multiple_of;
}

void apply_hf_config(Config& config, const std::set<std::string>& given) {
  const std::string file = config_json_of(config);
  const nlohmann::json j = read_config_json(file);
  const JsonFields c(j, file, kIncomplete);
  const std::string arch = architecture(c);
  const bool llama = llama_block(arch);
  if (!llama && arch != "GPT2LMHeadModel")
    throw ConfigError(cat(file, ": architecture ", arch, " is not supported; ztrain loads LlamaForCausalLM, ",
                          "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM or GPT2LMHeadModel"));
  check_fixed(c, llama);
  check_shape_fields(c, llama);
  for (const Field& f : llama ? llama_fields(j, c, arch) : gpt2_fields(c)) apply(config, given, f, file);
  if (llama) take_ffn_width(config, file);
  const std::string positions = llama ? "max_position_embeddings" : "n_positions";
  const std::int64_t max_len = context_length(c, arch);
  if (config.model.seq_len > max_len)
    throw ConfigError(cat("model.seq_len=", config.model.seq_len, " exceeds ", positions, "=", max_len, " in ", file,
                          ": give model.seq_len <= ", max_len));
  if (arch == "MistralForCausalLM") check_window(config, j, c);
}

}  // namespace zt::config
