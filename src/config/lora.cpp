// lora.* keys: module names of either family and their checks (lora.hpp).
#include "config/lora.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

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

std::vector<std::string> lora_target_modules(const Config& c) {
  const std::vector<std::string>& known = family_modules(c.model.arch);
  const std::string family = c.model.arch == Arch::kLlama ? "llama" : "gpt2";
  if (c.lora.targets.empty()) return c.model.arch == Arch::kLlama ? std::vector<std::string>{"q_proj", "v_proj"}
                                                                  : std::vector<std::string>{"c_attn"};
  std::vector<bool> chosen(known.size(), false);
  std::stringstream in(c.lora.targets);
  std::string name;
  while (std::getline(in, name, ',')) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (c.model.arch == Arch::kLlama && !name.ends_with("_proj")) name += "_proj";  // q -> q_proj
    const auto it = std::find(known.begin(), known.end(), name);
    if (it == known.end())
      throw ConfigError(cat("lora.targets=", c.lora.targets, ": model.arch=", family, " has no module '", name,
                            "'; use a comma-separated subset of ", list(known)));
    chosen[static_cast<std::size_t>(it - known.begin())] = true;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < known.size(); ++i)
    if (chosen[i]) out.push_back(known[i]);
  if (out.empty()) throw ConfigError(cat("lora.targets=", c.lora.targets, " names no module; use a subset of ", list(known)));
  return out;
}

double lora_scale(const LoraConfig& l) {
  const double r = static_cast<double>(l.rank);
  return l.rslora ? l.alpha / std::sqrt(r) : l.alpha / r;
}

void check_lora(const Config& c) {
  const LoraConfig& l = c.lora;
  const LoraConfig d;
  if (l.rank == 0) {
    if (!l.targets.empty() || l.alpha != d.alpha || l.rslora)
      throw ConfigError("lora.targets / lora.alpha / lora.rslora are given but lora.rank=0 turns LoRA off: set "
                        "lora.rank (e.g. 16) or drop them");
    return;
  }
  lora_target_modules(c);  // throws on an unknown name
  if (c.parallel.tp > 1)
    throw ConfigError(cat("lora.rank > 0 with parallel.tp=", c.parallel.tp,
                          ": LoRA is not split over tensor-parallel ranks yet (issue 19); use parallel.tp=1"));
}

}  // namespace zt::config
