// lora.* keys: module names of either family and their checks (lora.hpp).
#include "config/lora.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "config/json_fields.hpp"
#include "config/value.hpp"
#include "core/error.hpp"

namespace zt::config {
namespace {

const std::vector<std::string>& family_modules(Arch arch) {
  static const std::vector<std::string> llama{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  static const std::vector<std::string> gpt2{"c_attn", "c_proj", "c_fc"};
  return arch == Arch::kLlama ? llama : gpt2;
}

std::string list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace

namespace {

// PEFT matches a target as the end of a module's dotted name, so `self_attn.q_proj` names what `q_proj`
// does; the module's own path within a block reads as its name. GPT-2's c_proj is one ztrain target for
// both output projections (attn.c_proj, mlp.c_proj): one of them alone is no ztrain target.
std::string without_block_path(Arch arch, const std::string& name, std::set<std::string>& c_proj_paths) {
  static const std::vector<std::pair<std::string, std::string>> kLlama = {
      {"self_attn.q_proj", "q_proj"}, {"self_attn.k_proj", "k_proj"}, {"self_attn.v_proj", "v_proj"},
      {"self_attn.o_proj", "o_proj"}, {"mlp.gate_proj", "gate_proj"}, {"mlp.up_proj", "up_proj"}, {"mlp.down_proj", "down_proj"}};
  static const std::vector<std::pair<std::string, std::string>> kGpt2 = {
      {"attn.c_attn", "c_attn"}, {"mlp.c_fc", "c_fc"}, {"attn.c_proj", "c_proj"}, {"mlp.c_proj", "c_proj"}};
  for (const auto& [path, module] : arch == Arch::kLlama ? kLlama : kGpt2)
    if (name == path) {
      if (module == "c_proj") c_proj_paths.insert(path);
      return module;
    }
  return name;
}

// The modules a comma-separated list names (`what` says whose list it is in errors: the user's
// lora.targets as written, or an adapter's target_modules). Llama's short names gain "_proj".
std::vector<std::string> modules_named(Arch arch, const std::string& names, const std::string& what) {
  const std::vector<std::string>& known = family_modules(arch);
  const std::string family = arch == Arch::kLlama ? "llama" : "gpt2";
  std::vector<bool> chosen(known.size(), false);
  std::set<std::string> c_proj_paths;  // GPT-2's attn.c_proj / mlp.c_proj as written
  std::stringstream in(names);
  std::string given;
  while (std::getline(in, given, ',')) {
    std::string name = given;
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name.empty())
      throw ConfigError(cat(what, " has an empty name (two commas, or a comma at an end); use a comma-separated subset of ",
                            list(known)));
    const std::string as_written = name;
    name = without_block_path(arch, name, c_proj_paths);
    static const std::set<std::string> kShortLlama = {"q", "k", "v", "o", "gate", "up", "down"};
    if (arch == Arch::kLlama && kShortLlama.contains(name)) name += "_proj";  // q -> q_proj
    const auto it = std::find(known.begin(), known.end(), name);
    if (it == known.end()) {
      const bool outside_blocks = name == "lm_head" || name == "embed_tokens" || name == "wte" || name == "wpe";
      throw ConfigError(cat(what, ": model.arch=", family, " has no module '", as_written, "'",
                            outside_blocks ? " that LoRA adapts here (only the blocks' linear layers take adapters)" : "",
                            "; use a comma-separated subset of ", list(known),
                            arch == Arch::kLlama ? " (or q,k,v,o,gate,up,down)" : ""));
    }
    chosen[static_cast<std::size_t>(it - known.begin())] = true;
  }
  if (c_proj_paths.size() == 1)
    throw ConfigError(cat(what, ": ", *c_proj_paths.begin(), " alone: ztrain's GPT-2 adapts c_proj as one target, both "
                          "output projections (attn.c_proj and mlp.c_proj, as PEFT's \"c_proj\" matches them); name both, or c_proj"));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < known.size(); ++i)
    if (chosen[i]) out.push_back(known[i]);
  if (out.empty()) throw ConfigError(cat(what, " names no module; use a subset of ", list(known)));
  return out;
}

}  // namespace

std::vector<std::string> lora_target_modules(const Config& c) {
  if (c.lora.targets.empty()) return c.model.arch == Arch::kLlama ? std::vector<std::string>{"q_proj", "v_proj"}
                                                                  : std::vector<std::string>{"c_attn"};
  if (c.lora.targets == "all-linear") return family_modules(c.model.arch);  // PEFT's keyword: every block linear
  return modules_named(c.model.arch, c.lora.targets, cat("lora.targets=", c.lora.targets));
}

std::string peft_adapter_config_path(const Config& c) {
  if (c.init.from.empty()) return "";
  const std::filesystem::path file = std::filesystem::path(c.init.from) / "adapter_config.json";
  std::error_code ec;
  return std::filesystem::is_regular_file(file, ec) ? file.string() : "";
}

namespace {
constexpr const char* kNotAdapter = "it is not a PEFT LoRA adapter_config.json";

nlohmann::json read_adapter_config(const std::string& file) {
  return read_json_object(file, "init.from's adapter_config.json (a PEFT adapter directory)");
}

// A LoraConfig option (PEFT's tuners/lora/config.py) whose non-default value changes what the adapters
// compute, or what the base under them is, beyond the plain LoRA ztrain implements: refused by name.
struct Unsupported {
  const char* name;
  const char* what;  // what the option does that ztrain does not
};
const std::vector<Unsupported>& unsupported_options() {
  static const std::vector<Unsupported> kOptions = {
      {"use_dora", "DoRA (a learned magnitude per output)"},
      {"lora_bias", "a bias on lora_B"},
      {"modules_to_save", "modules trained and saved whole beside the adapters"},
      {"rank_pattern", "ranks per module other than r"},
      {"alpha_pattern", "alphas per module other than lora_alpha"},
      {"layers_to_transform", "adapters on some layers only"},
      {"exclude_modules", "modules excluded from target_modules"},
      {"layer_replication", "a model built by repeating layers"},
      {"trainable_token_indices", "trained rows of the token embedding"},
      {"target_parameters", "adapters on parameters rather than modules"},
      {"alora_invocation_tokens", "activated LoRA (adapters on only after invocation tokens)"},
      {"use_qalora", "quantization-aware LoRA"},
      {"arrow_config", "a routed mixture of adapters"},
  };
  return kOptions;
}

// Absent, null, false, empty ("", [], {}): the option is off.
bool is_off(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || it->is_null()) return true;
  if (it->is_boolean()) return !it->get<bool>();
  return (it->is_string() || it->is_array() || it->is_object()) && it->empty();
}

// PiSSA, OLoRA, CorDA and LoftQ change the base's weights at initialisation (the adapters then sit on
// a residual or quantized base); gaussian, true and false initialise the adapters only.
bool init_changes_base(const JsonFields& f) {
  if (!f.has("init_lora_weights")) return false;
  if (f.text("init_lora_weights") == "true" || f.text("init_lora_weights") == "false") return false;
  const std::string init = f.string("init_lora_weights");
  return init != "gaussian" && init != "eva";
}

void check_options(const nlohmann::json& j, const JsonFields& f, const std::string& file) {
  for (const Unsupported& o : unsupported_options())
    if (!is_off(j, o.name))
      throw ConfigError(cat("init.from: ", file, " sets ", o.name, "=", f.text(o.name).substr(0, 80), " (", o.what,
                            "), which ztrain's LoRA does not implement: give an adapter trained without it"));
  if (const std::string bias = f.string("bias", "none"); bias != "none")
    throw ConfigError(cat("init.from: ", file, " sets bias=\"", bias, "\" (the base's biases trained too), which ztrain's ",
                          "LoRA does not implement (it trains lora_A and lora_B only): give an adapter trained with bias=\"none\""));
  if (init_changes_base(f))
    throw ConfigError(cat("init.from: ", file, " sets init_lora_weights=", f.text("init_lora_weights"), ", which changes the ",
                          "base's weights under the adapters; ztrain keeps the base as base_model_name_or_path holds it: "
                          "convert the adapter to plain LoRA first (PEFT's path_initial_model_for_weight_conversion)"));
  f.boolean("fan_in_fan_out", false);  // any value: PEFT sets it from the module type (true for GPT-2's Conv1D)
}

// target_modules as PEFT reads it: a list of module names, or "all-linear" (every linear layer of the
// blocks, the output layer excluded); another string is a regular expression, which ztrain does not match.
std::string target_list(const nlohmann::json& j, const JsonFields& f, const std::string& file, Arch arch) {
  if (j.contains("target_modules") && j["target_modules"].is_string()) {
    const std::string text = j["target_modules"].get<std::string>();
    if (text == "all-linear") return list(family_modules(arch));
    throw ConfigError(cat("init.from: ", file, " gives target_modules as the regular expression \"", text, "\"; ztrain ",
                          "reads a list of module names (", list(family_modules(arch)), "): write the modules it matched as a list"));
  }
  std::string out;
  for (const std::string& t : f.strings("target_modules")) out += (out.empty() ? "" : ",") + t;
  return out;
}

// The adapter directory's r, lora_alpha, use_rslora, lora_dropout and target_modules must be this run's
// lora.* keys; options ztrain does not implement are refused by name.
void check_adapter_config(const Config& c, const std::string& file) {
  const nlohmann::json j = read_adapter_config(file);
  const JsonFields f(j, file, kNotAdapter);
  if (const std::string type = f.string("peft_type"); type != "LORA")
    throw ConfigError(cat("init.from: ", file, " is not a LoRA adapter (peft_type ", type, "); ztrain trains LoRA adapters"));
  check_options(j, f, file);
  if (c.lora.rank == 0)
    throw ConfigError(cat("init.from=", c.init.from, " is a PEFT LoRA adapter: set lora.rank=", f.integer("r"),
                          " (and lora.alpha, lora.targets as its adapter_config.json says) to go on training it"));
  auto differ = [&](const std::string& key, const std::string& mine, const std::string& theirs, const char* name) {
    if (mine != theirs)
      throw ConfigError(cat(key, "=", mine, " disagrees with ", name, "=", theirs, " in ", file, ": set ", key, "=", theirs));
  };
  differ("lora.rank", std::to_string(c.lora.rank), std::to_string(f.integer("r")), "r");
  differ("lora.alpha", value::format_double(c.lora.alpha), value::format_double(f.number("lora_alpha")), "lora_alpha");
  differ("lora.rslora", c.lora.rslora ? "true" : "false", f.boolean("use_rslora", false) ? "true" : "false", "use_rslora");
  differ("lora.dropout", value::format_double(c.lora.dropout), value::format_double(f.number("lora_dropout", 0.0)),
         "lora_dropout");
  const std::string theirs = target_list(j, f, file, c.model.arch);
  const std::string mine = list(lora_target_modules(c));
  const std::string wanted = list(modules_named(c.model.arch, theirs, cat("target_modules [", theirs, "] in ", file)));
  if (mine != wanted)
    throw ConfigError(cat("lora.targets=", c.lora.targets.empty() ? "(empty: the default)" : c.lora.targets, " (modules ",
                          mine, ") disagrees with target_modules [", theirs, "] in ", file, ": set lora.targets=", wanted));
}

std::string adapter_base(const std::string& file) {
  const nlohmann::json j = read_adapter_config(file);
  const JsonFields f(j, file, kNotAdapter);
  // PEFT writes null for a model built in memory; "" names nothing either
  if (!f.has("base_model_name_or_path") || f.string("base_model_name_or_path").empty())
    throw ConfigError(cat(file, ": base_model_name_or_path is ",
                          f.has("base_model_name_or_path") ? std::string("\"\"") : f.text("base_model_name_or_path"),
                          ": the adapter does not say which model it sits on; set it to the base model's directory (or "
                          ".safetensors file)"));
  return f.string("base_model_name_or_path");
}
}  // namespace

void check_peft_base(const Config& c) {
  const std::string file = peft_adapter_config_path(c);
  if (file.empty()) return;
  const std::string base = adapter_base(file);
  std::error_code ec;
  if (!std::filesystem::exists(base, ec))
    throw ConfigError(cat("init.from=", c.init.from, ": the adapter's base ", base, " (base_model_name_or_path in ", file,
                          ") is not found from ", std::filesystem::current_path(ec).string(),
                          ": a relative path is read from the current directory (set base_model_name_or_path to the "
                          "base's absolute path, or run from where it is relative to); a Hub id must be downloaded "
                          "first (e.g. huggingface-cli download ", base, " --local-dir DIR), then set "
                          "base_model_name_or_path to that directory (or to the base's .safetensors file)"));
}

std::string lora_base_path(const Config& c) {
  const std::string file = peft_adapter_config_path(c);
  if (file.empty()) return c.init.from;
  return adapter_base(file);
}

double lora_scale(const LoraConfig& l) {
  const double r = static_cast<double>(l.rank);
  return l.rslora ? l.alpha / std::sqrt(r) : l.alpha / r;
}

namespace {

// lora.base_dtype: bf16/fp32 name the compute dtype (a base in another dtype than the model computes in is
// not implemented); nf4 runs at any ZeRO stage (sharded at 3).
void check_base_dtype(const Config& c) {
  const LoraBaseDtype b = c.lora.base_dtype;
  const std::string name = value::enum_name(b);
  if (c.lora.base_double_quant && b != LoraBaseDtype::kNf4)
    throw ConfigError(cat("lora.base_double_quant=true quantizes an NF4 base's scales, but lora.base_dtype=", name,
                          ": set lora.base_dtype=nf4, or drop lora.base_double_quant"));
  const bool bf16 = b == LoraBaseDtype::kBf16, fp32 = b == LoraBaseDtype::kFp32;
  if ((bf16 && c.train.precision != Precision::kBf16) || (fp32 && c.train.precision != Precision::kFp32))
    throw ConfigError(cat("lora.base_dtype=", name, " with train.precision=", value::enum_name(c.train.precision),
                          ": a ", name, " base is held in the compute dtype, which train.precision sets; use ",
                          "lora.base_dtype=auto (the compute dtype) or nf4, or train.precision=", name));
}

}  // namespace

void apply_adapter_config(Config& c) {
  const std::string file = peft_adapter_config_path(c);
  if (file.empty()) return;
  const nlohmann::json j = read_adapter_config(file);
  const JsonFields f(j, file, kNotAdapter);
  c.lora.rank = f.integer("r");
  c.lora.alpha = f.number("lora_alpha");
  c.lora.rslora = f.boolean("use_rslora", false);
  c.lora.dropout = f.number("lora_dropout", 0.0);
  c.lora.targets = list(modules_named(c.model.arch, target_list(j, f, file, c.model.arch), file));
}

void check_lora(const Config& c) {
  const LoraConfig& l = c.lora;
  const LoraConfig d;
  if (const std::string file = peft_adapter_config_path(c); !file.empty()) check_adapter_config(c, file);
  if (l.rank == 0) {
    if (!l.targets.empty() || l.alpha != d.alpha || l.rslora || l.dropout != d.dropout || l.base_dtype != d.base_dtype ||
        l.base_double_quant)
      throw ConfigError("lora.targets / lora.alpha / lora.rslora / lora.dropout / lora.base_dtype / lora.base_double_quant "
                        "are given but lora.rank=0 turns LoRA off: set lora.rank (e.g. 16) or drop them");
    return;
  }
  lora_target_modules(c);  // throws on an unknown name
  check_base_dtype(c);
}

}  // namespace zt::config
