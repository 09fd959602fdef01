// What an export takes from the run's base (export_base.hpp).
#include "model/export_base.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "config/hf_config.hpp"
#include "core/error.hpp"
#include "core/sha256.hpp"
#include "model/hf_dir.hpp"
#include "model/safetensors.hpp"

namespace zt::model {
namespace fs = std::filesystem;
namespace {

nlohmann::ordered_json read_json(const fs::path& path) {
  try {
    return nlohmann::ordered_json::parse(std::ifstream(path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(cat(path.string(), ": not a JSON file (", e.what(), ")"));
  }
}

}  // namespace

// The base's positions as transformers reads its config.json (the default of its class where the file
// has none: an absent key is not the run's training length).
GptShape at_base_context(GptShape shape, const std::string& base) {
  if (!config::has_config_json(base)) return shape;  // a directory, or a .safetensors file with config.json beside
  shape.seq_len = static_cast<int>(std::max<std::int64_t>(shape.seq_len, config::hf_context(base).positions));
  return shape;
}

ExportWeights at_base_context(ParamTable table, std::vector<float> weights, const std::string& base) {
  const GptShape shape = at_base_context(table.shape(), base);
  if (shape.seq_len == table.shape().seq_len) return {std::move(table), std::move(weights)};
  const std::int64_t trained = table.shape().seq_len, context = shape.seq_len;  // rows of the position table
  ParamTable wide(shape);
  if (wide.numel() == table.numel()) return {std::move(wide), std::move(weights)};  // no position table
  // A learned position table: every parameter as trained, the base's rows past the trained ones.
  std::vector<float> out(wide.numel());
  load_pretrained(base, wide, out.data());
  for (const ParamInfo& p : table.params()) {
    const ParamInfo& q = wide.find(p.name);
    ZT_CHECK(p.numel == q.numel ||
                 (p.shape.size() == 2 && p.shape[0] == trained && q.shape[0] == context && p.shape[1] == q.shape[1]),
             "export: ", p.name, " differs from the base's beyond its positions");
    std::copy_n(weights.begin() + static_cast<std::ptrdiff_t>(p.offset), p.numel, out.begin() + static_cast<std::ptrdiff_t>(q.offset));
  }
  return {std::move(wide), std::move(out)};
}

void carry_base_config(const std::string& export_dir, const std::string& base) {
  if (!config::has_config_json(base)) return;
  const fs::path to = fs::path(export_dir) / "config.json";
  const nlohmann::ordered_json source = read_json(fs::path(config::hf_config_dir(base)) / "config.json");
  nlohmann::ordered_json exported = read_json(to);
  bool changed = false;
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (source.contains(key) && !source[key].is_null()) exported[key] = source[key], changed = true;
  // Mistral is Llama's block attending within a window the run never exceeded (model.seq_len <= it):
  // exported as a Llama it would claim full attention over all its positions, another function past the
  // window. It goes back as what it was, window and all (0: none, written null as transformers does).
  if (const config::HfContext context = config::hf_context(base); context.architecture == "MistralForCausalLM") {
    exported["architectures"] = nlohmann::ordered_json::array({"MistralForCausalLM"});
    exported["model_type"] = "mistral";
    exported["sliding_window"] = context.window > 0 ? nlohmann::ordered_json(context.window) : nlohmann::ordered_json();
    changed = true;
  }
  if (changed) write_text_file(to.string(), exported.dump(2) + "\n");
}

std::string base_fingerprint(const std::string& base, const GptShape& trained) {
  if (base.empty() || !config::has_config_json(base)) return "";
  Sha256 hash;
  const fs::path dir(config::hf_config_dir(base));
  for (const char* name : kBaseFilesExported) {  // name, length and bytes of each present
    std::ifstream in(dir / name, std::ios::binary);
    if (!in) continue;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string head = cat(name, ":", text.size(), ":");
    hash.update(head.data(), head.size());
    hash.update(text.data(), text.size());
  }
  const ParamTable table(trained), wide(at_base_context(trained, base));
  if (wide.numel() != table.numel()) {  // the rows an export takes from the base's position table
    const SafetensorsReader reader = open_pretrained(base, wide);
    for (const ParamInfo& p : wide.params()) {
      if (p.numel == table.find(p.name).numel) continue;
      std::vector<float> values(p.numel);
      reader.read(static_cast<std::int64_t>(p.offset), static_cast<std::int64_t>(p.numel), values.data());
      hash.update(values.data(), values.size() * sizeof(float));
    }
  }
  return to_hex(hash.finish());
}

}  // namespace zt::model
