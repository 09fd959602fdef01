// lora.* keys: module names of either family and their checks (lora.hpp).
#include "config/lora.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

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

// The modules a comma-separated list names (`what` says whose list it is in errors: the user's
// lora.targets as written, or an adapter's target_modules). Llama's short names gain "_proj".
std::vector<std::string> modules_named(Arch arch, const std::string& names, const std::string& what) {
  const std::vector<std::string>& known = family_modules(arch);
  const std::string family = arch == Arch::kLlama ? "llama" : "gpt2";
  std::vector<bool> chosen(known.size(), false);
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
    if (arch == Arch::kLlama && !name.ends_with("_proj")) name += "_proj";  // q -> q_proj
    const auto it = std::find(known.begin(), known.end(), name);
    if (it == known.end())
      throw ConfigError(cat(what, ": model.arch=", family, " has no module '", as_written, "'",
                            name == as_written ? "" : cat(" (read as ", name, ")"), "; use a comma-separated subset of ",
                            list(known), arch == Arch::kLlama ? " (or q,k,v,o,gate,up,down)" : ""));
    chosen[static_cast<std::size_t>(it - known.begin())] = true;
  }
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
  return modules_named(c.model.arch, c.lora.targets, cat("lora.targets=", c.lora.targets));
}

std::string peft_adapter_config_path(const Config& c) {
  if (c.init.from.empty()) return "";
  const std::filesystem::path file = std::filesystem::path(c.init.from) / "adapter_config.json";
  std::error_code ec;
  return std::filesystem::is_regular_file(file, ec) ? file.string() : "";
}

namespace {
nlohmann::json read_adapter_config(const std::string& file) {
  std::ifstream in(file);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(cat("init.from: ", file, " is not valid JSON (", e.what(), ")"));
  }
}

template <typename T>
T field(const nlohmann::json& j, const std::string& file, const char* name) {
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ConfigError(cat("init.from: ", file, " has no valid \"", name, "\"; it is not a PEFT LoRA adapter_config.json"));
  }
}

// The adapter directory's r, lora_alpha, use_rslora and target_modules must be this run's lora.* keys.
void check_adapter_config(const Config& c, const std::string& file) {
  const nlohmann::json j = read_adapter_config(file);
  if (field<std::string>(j, file, "peft_type") != "LORA")
    throw ConfigError(cat("init.from: ", file, " is not a LoRA adapter (peft_type ", j.at("peft_type").dump(), ")"));
  if (c.lora.rank == 0)
    throw ConfigError(cat("init.from=", c.init.from, " is a PEFT LoRA adapter: set lora.rank=", j.value("r", 0),
                          " (and lora.alpha, lora.targets as its adapter_config.json says) to go on training it"));
  auto differ = [&](const std::string& key, const std::string& mine, const std::string& theirs, const char* name) {
    if (mine != theirs)
      throw ConfigError(cat(key, "=", mine, " disagrees with ", name, "=", theirs, " in ", file, ": set ", key, "=", theirs));
  };
  differ("lora.rank", std::to_string(c.lora.rank), std::to_string(field<std::int64_t>(j, file, "r")), "r");
  differ("lora.alpha", value::format_double(c.lora.alpha), value::format_double(field<double>(j, file, "lora_alpha")), "lora_alpha");
  differ("lora.rslora", c.lora.rslora ? "true" : "false", j.value("use_rslora", false) ? "true" : "false", "use_rslora");
  std::string theirs;
  for (const std::string& t : field<std::vector<std::string>>(j, file, "target_modules")) theirs += (theirs.empty() ? "" : ",") + t;
  const std::string mine = list(lora_target_modules(c));
  const std::string wanted = list(modules_named(c.model.arch, theirs, cat("target_modules [", theirs, "] in ", file)));
  if (mine != wanted)
    throw ConfigError(cat("lora.targets=", c.lora.targets.empty() ? "(empty: the default)" : c.lora.targets, " (modules ",
                          mine, ") disagrees with target_modules [", theirs, "] in ", file, ": set lora.targets=", wanted));
}
}  // namespace

std::string lora_base_path(const Config& c) {
  const std::string file = peft_adapter_config_path(c);
  if (file.empty()) return c.init.from;
  return field<std::string>(read_adapter_config(file), file, "base_model_name_or_path");
}

double lora_scale(const LoraConfig& l) {
  const double r = static_cast<double>(l.rank);
  return l.rslora ? l.alpha / std::sqrt(r) : l.alpha / r;
}

void check_lora(const Config& c) {
  const LoraConfig& l = c.lora;
  const LoraConfig d;
  if (const std::string file = peft_adapter_config_path(c); !file.empty()) check_adapter_config(c, file);
  if (l.rank == 0) {
    if (!l.targets.empty() || l.alpha != d.alpha || l.rslora)
      throw ConfigError("lora.targets / lora.alpha / lora.rslora are given but lora.rank=0 turns LoRA off: set "
                        "lora.rank (e.g. 16) or drop them");
    return;
  }
  lora_target_modules(c);  // throws on an unknown name
}

}  // namespace zt::config
