// Hugging Face model directories (see hf_dir.hpp). Shard names and the index follow transformers'
// save_pretrained, so a directory written here loads with from_pretrained and the other way round.
#include "model/hf_dir.hpp"

#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "model/safetensors.hpp"

namespace zt::model {
namespace {
namespace fs = std::filesystem;

constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

// A shard of the index as save_pretrained names them: a path relative to the model directory that
// stays inside it. An absolute path or a ".." would make the index point ztrain at files elsewhere.
void check_inside(const std::string& index, const std::string& tensor, const std::string& file) {
  const fs::path p(file);
  bool up = false;
  for (const fs::path& part : p) up = up || part == "..";
  if (file.empty() || p.has_root_path() || up)
    throw InputError(cat(index, ": weight_map[\"", tensor, "\"] = \"", file, "\" is not a file inside the model directory; ",
                         "an index names its shards relative to it (model-00001-of-00002.safetensors)"));
}

// The shard files the index names, each once, as paths inside dir.
std::vector<std::string> shards_of(const fs::path& dir, const std::string& index) {
  std::error_code ec;
  if (!fs::is_regular_file(index, ec))
    throw InputError(cat(index, " is not a file (", fs::is_directory(index, ec) ? "a directory" : "unreadable",
                         "): a sharded Hugging Face directory's index is a JSON file"));
  std::ifstream in(index);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(cat(index, ": not valid JSON (", e.what(), ")"));
  }
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    throw InputError(cat(index, ": has no \"weight_map\" object (tensor name -> shard file)"));
  std::set<std::string> files;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) throw InputError(cat(index, ": weight_map[\"", name, "\"] is not a file name"));
    check_inside(index, name, file.get<std::string>());
    files.insert(file.get<std::string>());
  }
  std::vector<std::string> paths;
  for (const std::string& f : files) {
    if (!fs::exists(dir / f)) throw InputError(cat(index, ": shard ", f, " is not in ", dir.string()));
    paths.push_back((dir / f).string());
  }
  return paths;
}

std::string shard_name(std::size_t i, std::size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

// Parameters in name order, cut greedily into shards of at most max_bytes (one oversized tensor alone).
std::vector<std::vector<const ParamInfo*>> split(const ParamTable& table, std::size_t width, std::uint64_t max_bytes) {
  std::map<std::string, const ParamInfo*> sorted;
  for (const ParamInfo& p : table.params()) sorted[p.name] = &p;
  std::vector<std::vector<const ParamInfo*>> shards(1);
  std::uint64_t bytes = 0;
  for (const auto& [name, p] : sorted) {
    const std::uint64_t size = p->hf_numel() * width;
    if (!shards.back().empty() && bytes + size > max_bytes) shards.emplace_back(), bytes = 0;
    shards.back().push_back(p);
    bytes += size;
  }
  return shards;
}

// An earlier export's weights in dir (model.safetensors, the index, model-*-of-*.safetensors shards) go
// first, as save_pretrained cleans them: no file of an older export is left to mislead a reader.
void remove_stale_weights(const fs::path& dir) {
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool shard = name.starts_with("model-") && name.find("-of-") != std::string::npos && name.ends_with(".safetensors");
    if (shard || name == kSingle || name == kIndex) fs::remove(e.path());
  }
}

}  // namespace

namespace {
// The safetensors files of init.from (a file, or a directory as save_pretrained writes it) and where a
// missing tensor is reported; anything else is an InputError saying what the path holds.
std::pair<std::vector<std::string>, std::string> weight_files(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {{path}, path};
  const fs::path dir(path);
  const std::string index = (dir / kIndex).string();
  // transformers' order: model.safetensors before the index, where a directory has both (a copy left over)
  if (fs::exists(dir / kSingle)) {
    if (fs::exists(index))
      log::warn(cat(path, ": holds both ", kSingle, " and ", kIndex, "; reading ", kSingle, " as transformers does "
                    "(remove the one that is stale)"));
    return {{(dir / kSingle).string()}, (dir / kSingle).string()};
  }
  if (fs::exists(index)) return {shards_of(dir, index), index};
  if (fs::exists(dir / "pytorch_model.bin") || fs::exists(dir / "pytorch_model.bin.index.json"))
    throw InputError(cat(path, ": holds PyTorch pickle weights (pytorch_model.bin), which ztrain does not read (a pickle "
                         "runs code): convert them to safetensors (in Python: AutoModelForCausalLM.from_pretrained(DIR)."
                         "save_pretrained(OUT, safe_serialization=True)) and give OUT"));
  if (fs::exists(dir / "adapter_config.json"))
    throw InputError(cat(path, ": a PEFT adapter (adapter_config.json), not a model: give its base (the adapter's "
                         "base_model_name_or_path); init.from=", path, " trains the adapter, zgen --model ", path,
                         " generates with it merged"));
  throw InputError(cat(path, ": holds neither ", kSingle, " nor ", kIndex, "; not a Hugging Face model directory"));
}
}  // namespace

void load_pretrained(const std::string& path, const ParamTable& table, float* host_params, Nf4Weights* nf4) {
  const auto [files, where] = weight_files(path);
  load_safetensors_files(files, where, table, host_params, nf4);
}

SafetensorsReader open_pretrained(const std::string& path, const ParamTable& table) {
  const auto [files, where] = weight_files(path);
  return SafetensorsReader(files, where, table);
}

std::uint64_t parse_shard_size(const std::string& text) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  std::string unit(end, text.data() + text.size());
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::map<std::string, std::uint64_t> scale = {{"", 1},          {"B", 1},          {"KB", 1000},
                                                      {"MB", 1000000},  {"GB", 1000000000}, {"KIB", 1ull << 10},
                                                      {"MIB", 1ull << 20}, {"GIB", 1ull << 30}};
  const auto it = scale.find(unit);
  if (ec != std::errc() || it == scale.end() || n == 0 || n > (~0ull) / it->second)
    throw ConfigError(cat("--max-shard-size ", text, ": give a positive size such as 5GB, 500MB, 2GiB or bytes"));
  return n * it->second;
}

void export_hf_directory(const std::string& dir, const ParamTable& table, const float* host_params, bool bf16,
                         std::uint64_t max_shard_bytes) {
  const fs::path out(dir);
  fs::create_directories(out);
  const std::size_t width = bf16 ? 2 : 4;
  const auto shards = split(table, width, max_shard_bytes);
  remove_stale_weights(out);
  if (shards.size() == 1) {
    save_tensors((out / kSingle).string(), shards[0], host_params, bf16);
  } else {
    nlohmann::json map = nlohmann::json::object();
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < shards.size(); ++i) {
      save_tensors((out / shard_name(i, shards.size())).string(), shards[i], host_params, bf16);
      for (const ParamInfo* p : shards[i]) map[p->name] = shard_name(i, shards.size()), total += p->hf_numel() * width;
    }
    const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
    write_text_file((out / kIndex).string(), index.dump(2) + "\n");
  }
  write_text_file((out / "config.json").string(), hf_config_json(table.shape(), bf16 ? "bfloat16" : "float32"));
}

}  // namespace zt::model
