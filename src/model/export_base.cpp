// What an export takes from the run's base (export_base.hpp).
#include "model/export_base.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/hf_config.hpp"
#include "core/error.hpp"
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

// The positions the base's config.json declares (max_position_embeddings, GPT-2's n_positions); 0: none.
std::int64_t declared_positions(const std::string& base) {
  const nlohmann::ordered_json c = read_json(fs::path(base) / "config.json");
  for (const char* key : {"max_position_embeddings", "n_positions"})
    if (c.contains(key) && c[key].is_number_integer()) return c[key].get<std::int64_t>();
  return 0;
}

}  // namespace

GptShape at_base_context(GptShape shape, const std::string& base) {
  if (base.empty() || !config::is_hf_directory(base)) return shape;
  shape.seq_len = static_cast<int>(std::max<std::int64_t>(shape.seq_len, declared_positions(base)));
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

void carry_base_token_ids(const std::string& export_dir, const std::string& base) {
  if (base.empty() || !config::is_hf_directory(base)) return;
  const fs::path to = fs::path(export_dir) / "config.json";
  const nlohmann::ordered_json source = read_json(fs::path(base) / "config.json");
  nlohmann::ordered_json exported = read_json(to);
  bool changed = false;
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (source.contains(key) && !source[key].is_null()) exported[key] = source[key], changed = true;
  if (changed) write_text_file(to.string(), exported.dump(2) + "\n");
}

}  // namespace zt::model
