// ztok-progress.json as JSON (nlohmann), written through io::write_file_atomic.
#include "data/ztok_progress.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace zt::data {
namespace {

using nlohmann::json;

json to_json(const ShardStream::State& s) {
  return {{"shard", s.shard}, {"tokens", s.tokens}, {"docs", s.docs}, {"sources", s.sources},
          {"total_tokens", s.total_tokens}, {"total_docs", s.total_docs}};
}

ShardStream::State state_from(const json& j) {
  ShardStream::State s;
  s.shard = j.at("shard").get<std::uint64_t>();
  s.tokens = j.at("tokens").get<std::uint64_t>();
  s.docs = j.at("docs").get<std::uint64_t>();
  s.sources = j.at("sources").get<std::vector<std::string>>();
  s.total_tokens = j.at("total_tokens").get<std::uint64_t>();
  s.total_docs = j.at("total_docs").get<std::uint64_t>();
  return s;
}

json to_json(const ZtokSettings& s) {
  json inputs = json::array();
  for (const auto& [name, bytes] : s.inputs) inputs.push_back({{"name", name}, {"bytes", bytes}});
  return {{"vocab_hash", s.vocab_hash}, {"format", s.format}, {"field", s.field}, {"split", s.split},
          {"shard_tokens", s.shard_tokens}, {"valid_fraction", s.valid_fraction}, {"inputs", inputs}};
}

ZtokSettings settings_from(const json& j) {
  ZtokSettings s;
  s.vocab_hash = j.at("vocab_hash").get<std::string>();
  s.format = j.at("format").get<std::string>();
  s.field = j.at("field").get<std::string>();
  s.split = j.at("split").get<std::string>();
  s.shard_tokens = j.at("shard_tokens").get<std::uint64_t>();
  s.valid_fraction = j.at("valid_fraction").get<double>();
  for (const json& in : j.at("inputs")) s.inputs.emplace_back(in.at("name").get<std::string>(), in.at("bytes").get<std::uint64_t>());
  return s;
}

}  // namespace

void save_progress(const std::filesystem::path& dir, const ZtokProgress& p) {
  const InputPosition& at = p.position;
  const json j = {{"format", "ztok-progress"}, {"version", 1}, {"settings", to_json(p.settings)},
                  {"position", {{"file", at.file}, {"offset", at.offset}, {"doc", at.doc}, {"line", at.line},
                                {"mid_doc", at.mid_doc}}},
                  {"train", to_json(p.train)}, {"valid", to_json(p.valid)}, {"documents", p.documents},
                  {"replacements", p.replacements}, {"complete", p.complete}};
  io::write_file_atomic(dir / kProgressFile, j.dump(1) + "\n");
}

std::optional<ZtokProgress> load_progress(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kProgressFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  try {
    const json j = json::parse(text.str());
    if (j.at("format") != "ztok-progress" || j.at("version") != 1) throw InputError("not a ztok progress file, version 1");
    ZtokProgress p;
    p.settings = settings_from(j.at("settings"));
    const json& at = j.at("position");
    p.position = InputPosition{at.at("file").get<std::uint64_t>(), at.at("offset").get<std::uint64_t>(),
                               at.at("doc").get<std::uint64_t>(), at.at("line").get<std::uint64_t>(),
                               at.at("mid_doc").get<bool>()};
    p.train = state_from(j.at("train"));
    p.valid = state_from(j.at("valid"));
    p.documents = j.at("documents").get<std::uint64_t>();
    p.replacements = j.at("replacements").get<std::uint64_t>();
    p.complete = j.at("complete").get<bool>();
    return p;
  } catch (const std::exception& e) {
    throw InputError(cat(path.string(), " is damaged (", e.what(), "): start over in an empty --out directory"));
  }
}

std::string settings_difference(const ZtokSettings& a, const ZtokSettings& b) {
  if (a.vocab_hash != b.vocab_hash) return cat("vocabulary ", a.vocab_hash, " vs ", b.vocab_hash);
  if (a.format != b.format) return cat("--format ", a.format, " vs ", b.format);
  if (a.field != b.field) return cat("--field ", a.field, " vs ", b.field);
  if (a.split != b.split) return cat("--split ", a.split, " vs ", b.split);
  if (a.shard_tokens != b.shard_tokens) return cat("--shard-tokens ", a.shard_tokens, " vs ", b.shard_tokens);
  if (a.valid_fraction != b.valid_fraction) return cat("--valid-fraction ", a.valid_fraction, " vs ", b.valid_fraction);
  if (a.inputs.size() != b.inputs.size()) return cat(a.inputs.size(), " inputs vs ", b.inputs.size());
  for (std::size_t i = 0; i < a.inputs.size(); ++i)
    if (a.inputs[i] != b.inputs[i])
      return cat("input ", i + 1, ": ", a.inputs[i].first, " (", a.inputs[i].second, " bytes) vs ", b.inputs[i].first,
                 " (", b.inputs[i].second, " bytes)");
  return "";
}

}  // namespace zt::data
