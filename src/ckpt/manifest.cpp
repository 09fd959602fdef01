// JSON for the checkpoint's manifest and training state (nlohmann::json: keys sorted, so the same
// checkpoint gives the same bytes).
#include "ckpt/manifest.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "ckpt/layout.hpp"
#include "core/error.hpp"
#include "core/read_file.hpp"
#include "core/sha256.hpp"

namespace zt::ckpt {
using nlohmann::json;

namespace {

// How many ranges from `at` on form one strided group: equal numel, equal steps between offsets.
std::size_t group_length(const std::vector<FlatRange>& ranges, std::size_t at) {
  if (at + 1 >= ranges.size()) return 1;
  const std::int64_t numel = ranges[at].numel, stride = ranges[at + 1].offset - ranges[at].offset;
  if (stride <= 0) return 1;
  std::size_t end = at + 1;
  while (end < ranges.size() && ranges[end].numel == numel && ranges[end].offset - ranges[end - 1].offset == stride) ++end;
  return end - at;
}

// [offset, numel] per range, or [offset, numel, stride, count] for a run of at least kMinGroup ranges
// of one numel at equal strides: a row-parallel matrix's TP shard is one range per row, which would
// make a Llama-8B manifest hundreds of MB.
constexpr std::size_t kMinGroup = 3;
constexpr std::int64_t kMaxRangesPerRank = std::int64_t{1} << 26;

json ranges_json(const std::vector<FlatRange>& ranges, bool* grouped = nullptr) {
  json out = json::array();
  for (std::size_t i = 0; i < ranges.size();) {
    const std::size_t n = group_length(ranges, i);
    if (n >= kMinGroup) {
      out.push_back({ranges[i].offset, ranges[i].numel, ranges[i + 1].offset - ranges[i].offset, n});
      if (grouped) *grouped = true;
      i += n;
    } else {
      out.push_back({ranges[i].offset, ranges[i].numel});
      ++i;
    }
  }
  return out;
}

std::vector<FlatRange> parse_ranges(const json& j) {
  std::vector<FlatRange> out;
  for (const json& r : j) {
    if (!r.is_array() || (r.size() != 2 && r.size() != 4))
      throw std::invalid_argument("a range must be [offset, numel] or [offset, numel, stride, count]");
    const std::int64_t offset = r[0].get<std::int64_t>(), numel = r[1].get<std::int64_t>();
    const std::int64_t stride = r.size() == 4 ? r[2].get<std::int64_t>() : 0, count = r.size() == 4 ? r[3].get<std::int64_t>() : 1;
    if (count < 1 || (r.size() == 4 && stride < numel))
      throw std::invalid_argument("a strided group needs count >= 1 and stride >= numel (no overlap)");
    // A damaged count must not allocate without bound: no real rank holds this many ranges (a Llama-8B
    // TP shard: ~300 thousand).
    if (count > kMaxRangesPerRank - static_cast<std::int64_t>(out.size()))
      throw std::invalid_argument(cat("over ", kMaxRangesPerRank, " ranges for one rank"));
    for (std::int64_t k = 0; k < count; ++k) out.push_back({offset + k * stride, numel});
  }
  return out;
}

json files_json(const std::vector<FileRecord>& files) {
  json out = json::array();
  for (const FileRecord& f : files) out.push_back({{"path", f.path}, {"bytes", f.bytes}, {"sha256", f.sha256}});
  return out;
}

std::vector<FileRecord> parse_files(const json& j) {
  std::vector<FileRecord> out;
  for (const json& f : j)
    out.push_back({f.at("path").get<std::string>(), f.at("bytes").get<std::uint64_t>(), f.at("sha256").get<std::string>()});
  return out;
}

json model_json(const ModelDesc& m) {
  json hyper = json::object(), params = json::array(), units = json::array();
  for (const auto& [k, v] : m.hyper) hyper[k] = v;
  for (const ParamDesc& p : m.params)
    params.push_back({{"name", p.name}, {"shape", p.shape}, {"hf_shape", p.hf_shape}, {"flat_offset", p.flat_offset}});
  return {{"model", hyper}, {"params", params}, {"zero_units", ranges_json(m.units)}, {"flat_numel", m.flat_numel}};
}

ModelDesc parse_model(const json& j) {
  ModelDesc m;
  for (const auto& [k, v] : j.at("model").items()) m.hyper.emplace_back(k, v.get<std::int64_t>());
  for (const json& p : j.at("params"))
    m.params.push_back({p.at("name").get<std::string>(), p.at("shape").get<std::vector<std::int64_t>>(),
                        p.at("hf_shape").get<std::vector<std::int64_t>>(), p.at("flat_offset").get<std::int64_t>()});
  m.units = parse_ranges(j.at("zero_units"));
  m.flat_numel = j.at("flat_numel").get<std::int64_t>();
  return m;
}

// Parses `text` with `body`, turning any JSON error into a CheckpointError that names the file.
template <typename T, typename F>
T parse_with(const std::string& text, const std::string& where, F body) {
  try {
    return body(json::parse(text));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw CheckpointError(cat(where, ": not a valid file of this kind (", e.what(), ")"));
  }
}

}  // namespace

std::string manifest_json(const Manifest& m) {
  json j = model_json(m.model);
  j["format"] = kFormat;
  j["step"] = m.step;
  j["world_size"] = m.world_size;
  j["zero_stage"] = m.zero_stage;
  j["dtypes"] = {{"model.h5", "f32"}, {"master", "f32"}, {"exp_avg", "f32"}, {"exp_avg_sq", "f32"}};
  j["units"] = {{"flat_offset", "elements of the flat fp32 parameter buffer"}, {"numel", "elements"},
                {"ranges", "[flat_offset, numel] in elements"}, {"bytes", "bytes"}};
  json ranks = json::array();
  bool grouped = false;
  for (std::size_t r = 0; r < m.rank_ranges.size(); ++r)
    ranks.push_back({{"rank", r}, {"file", optim_file_name(static_cast<int>(r), m.world_size)},
                     {"ranges", ranges_json(m.rank_ranges[r], &grouped)}});
  // Version 2 only where a strided group is written (kManifestFormatVersion).
  j["format_version"] = grouped ? kManifestFormatVersion : kFormatVersion;
  j["ranks"] = ranks;
  j["files"] = files_json(m.files);
  // An optional field within format_version 1: older readers ignore it, and its absence (an older
  // writer) reads as "owner unknown".
  if (!m.run_id.empty()) j["run_id"] = m.run_id;
  // The manifest's own checksum: the files' SHA-256s are in it, but nothing checked the manifest itself,
  // and a flipped bit in an offset or a range verified sound and broke the resume. Of the compact dump of
  // every other field (keys sorted): the same text from the parsed file. Optional within the version: an
  // older manifest has none.
  j["manifest_sha256"] = sha256_hex(j.dump());
  return j.dump(1) + "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& where) {
  return parse_with<Manifest>(text, where, [&](const json& j) {
    if (j.at("format").get<std::string>() != kFormat)
      throw CheckpointError(cat(where, ": format is '", j.at("format").get<std::string>(), "', not '", kFormat, "'"));
    Manifest m;
    m.format_version = j.at("format_version").get<int>();
    if (m.format_version > kManifestFormatVersion)
      throw CheckpointError(cat(where, ": format_version ", m.format_version, " is newer than this ztrain reads (",
                                kManifestFormatVersion, "): use a newer ztrain"));
    if (j.contains("manifest_sha256")) {
      json rest = j;
      rest.erase("manifest_sha256");
      if (sha256_hex(rest.dump()) != j.at("manifest_sha256").get<std::string>())
        throw CheckpointError(cat(where, ": its content does not match its manifest_sha256: the manifest is damaged (a ",
                                  "flipped bit, or an edit by hand); the checkpoint cannot be trusted"));
    }
    m.step = j.at("step").get<std::int64_t>();
    m.world_size = j.at("world_size").get<int>();
    m.zero_stage = j.at("zero_stage").get<int>();
    m.model = parse_model(j);
    for (const json& r : j.at("ranks")) {
      if (r.at("rank").get<std::size_t>() != m.rank_ranges.size())
        throw CheckpointError(cat(where, ": the ranks are not listed in order 0..", m.world_size - 1));
      m.rank_ranges.push_back(parse_ranges(r.at("ranges")));
    }
    m.files = parse_files(j.at("files"));
    m.run_id = j.value("run_id", std::string());
    return m;
  });
}

std::string state_json(const TrainState& s) {
  const std::uint64_t wpe = s.windows_per_epoch;
  json j = {{"format", "ztrain-train-state"}, {"format_version", kFormatVersion}, {"step", s.step},
            {"tokens", s.tokens}, {"global_batch", s.global_batch}, {"seq_len", s.seq_len},
            {"data_cursor", {{"windows_consumed", s.windows_consumed}, {"windows_per_epoch", wpe},
                             {"epoch", wpe ? s.windows_consumed / wpe : 0}, {"window_in_epoch", wpe ? s.windows_consumed % wpe : 0}}},
            {"rng", {{"seed", s.seed}, {"kind", "counter-based (seed, step, purpose, index): no other state"}}},
            {"loss_scale", {{"enabled", s.loss_scale.enabled}, {"scale", s.loss_scale.scale}, {"good_steps", s.loss_scale.good_steps},
                            {"skipped_steps", s.loss_scale.skipped_steps}}},
            {"config", s.config_ini}, {"git_revision", s.git_revision}};
  if (!s.lora_base_sha256.empty()) j["lora"] = {{"base_sha256", s.lora_base_sha256}};
  if (!s.rl_reference_sha256.empty()) j["rl"] = {{"reference_sha256", s.rl_reference_sha256}};
  if (!s.init_from_sha256.empty()) j["init"] = {{"from_sha256", s.init_from_sha256}};
  if (!s.blend.empty()) {
    json corpora = json::array();
    for (const CorpusCursor& c : s.blend) {
      json corpus = {{"glob", c.glob}, {"weight", c.weight}, {"windows_per_epoch", c.windows_per_epoch},
                     {"windows_consumed", c.windows_consumed}};
      if (!c.shards_sha256.empty())
        corpus["shards"] = {{"count", c.shards}, {"tokens", c.tokens}, {"sha256", c.shards_sha256}};
      corpora.push_back(corpus);
    }
    j["data_cursor"]["blend"] = corpora;
    j["data_cursor"]["blend_start_window"] = s.blend_start;
  }
  return j.dump(1) + "\n";
}

TrainState parse_state(const std::string& text, const std::string& where) {
  return parse_with<TrainState>(text, where, [](const json& j) {
    TrainState s;
    s.step = j.at("step").get<std::int64_t>();
    s.tokens = j.at("tokens").get<std::uint64_t>();
    s.global_batch = j.at("global_batch").get<std::uint64_t>();
    s.seq_len = j.at("seq_len").get<std::uint64_t>();
    s.windows_consumed = j.at("data_cursor").at("windows_consumed").get<std::uint64_t>();
    s.windows_per_epoch = j.at("data_cursor").at("windows_per_epoch").get<std::uint64_t>();
    s.seed = j.at("rng").at("seed").get<std::uint64_t>();
    const json& ls = j.at("loss_scale");
    s.loss_scale = {ls.at("enabled").get<bool>(), ls.at("scale").get<double>(), ls.at("good_steps").get<std::int64_t>(),
                    ls.value("skipped_steps", std::int64_t{0})};  // absent before fp16 existed
    s.config_ini = j.at("config").get<std::string>();
    s.git_revision = j.at("git_revision").get<std::string>();
    if (j.contains("lora")) s.lora_base_sha256 = j.at("lora").at("base_sha256").get<std::string>();
    if (j.contains("rl")) s.rl_reference_sha256 = j.at("rl").at("reference_sha256").get<std::string>();
    if (j.contains("init")) s.init_from_sha256 = j.at("init").at("from_sha256").get<std::string>();  // absent before
    const json& cursor = j.at("data_cursor");
    if (cursor.contains("blend")) {  // absent before blends
      for (const json& c : cursor.at("blend")) {
        CorpusCursor k{c.at("glob").get<std::string>(), c.at("weight").get<double>(),
                       c.at("windows_per_epoch").get<std::uint64_t>(), c.at("windows_consumed").get<std::uint64_t>()};
        if (c.contains("shards")) {  // absent before shard sets were recorded
          const json& sh = c.at("shards");
          k.shards = sh.at("count").get<std::uint64_t>();
          k.tokens = sh.at("tokens").get<std::uint64_t>();
          k.shards_sha256 = sh.at("sha256").get<std::string>();
        }
        s.blend.push_back(std::move(k));
      }
      s.blend_start = cursor.at("blend_start_window").get<std::uint64_t>();
    }
    return s;
  });
}

namespace {
json record_json(const RankRecord& r) {
  json j = {{"rank", r.rank}, {"ranges", ranges_json(r.ranges)}, {"files", files_json(r.files)}, {"write_s", r.write_s}};
  if (!r.dir.empty()) j["dir"] = r.dir;
  for (const RankRecord& part : r.parts) j["parts"].push_back(record_json(part));
  return j;
}

RankRecord parse_record(const json& j) {
  RankRecord r{j.at("rank").get<int>(), parse_ranges(j.at("ranges")), parse_files(j.at("files")),
               j.at("write_s").get<double>()};
  r.dir = j.value("dir", std::string());
  if (j.contains("parts"))
    for (const json& part : j.at("parts")) r.parts.push_back(parse_record(part));
  return r;
}
}  // namespace

std::string rank_record_json(const RankRecord& r) { return record_json(r).dump(); }

RankRecord parse_rank_record(const std::string& text) {
  return parse_with<RankRecord>(text, "a rank's checkpoint record", [](const json& j) { return parse_record(j); });
}

std::string read_text(const std::filesystem::path& path) {
  std::optional<std::string> text = read_file(path);
  if (!text) throw CheckpointError(cat(path.string(), " cannot be opened"));
  return std::move(*text);
}

}  // namespace zt::ckpt
