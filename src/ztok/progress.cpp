// ztok-progress.json and the ranks' files as JSON (nlohmann), written through io::write_file_atomic;
// the start-or-resume decision; the progress line over every rank.
#include "ztok/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/read_file.hpp"
#include "io/atomic_file.hpp"

namespace zt::ztok {
namespace {

// A progress file that cannot be saved (a full disk) leaves the previous one: say how to go on.
void write_progress_file(const std::filesystem::path& path, const std::string& text) {
  try {
    io::write_file_atomic(path, text);
  } catch (const IoError& e) {
    const std::string what = e.what();
    if (what.find("No space left on device") == std::string::npos && what.find("Disk quota") == std::string::npos) throw;
    throw IoError(cat(what, "; free space there (or give another --out) and ", data::kZtokResumeAdvice));
  }
}

using nlohmann::json;

// A complete run's totals; the keys are the ones ztok wrote before one process became rank 0 of 1
// (an interrupted run's open shard is no longer recorded here).
json to_json(const SplitTotals& s) {
  return {{"shard", s.shards}, {"total_tokens", s.tokens}, {"total_docs", s.docs}};
}

SplitTotals totals_from(const json& j) {
  return {j.at("shard").get<std::uint64_t>(), j.at("total_tokens").get<std::uint64_t>(),
          j.at("total_docs").get<std::uint64_t>()};
}

json to_json(const ZtokSettings& s) {
  json inputs = json::array();
  for (std::size_t i = 0; i < s.inputs.size(); ++i) {
    json in = {{"name", s.inputs[i].first}, {"bytes", s.inputs[i].second}};
    if (s.modified_ns.size() == s.inputs.size()) in["modified_ns"] = s.modified_ns[i];
    inputs.push_back(in);
  }
  return {{"vocab_hash", s.vocab_hash}, {"format", s.format}, {"field", s.field}, {"split", s.split},
          {"shard_tokens", s.shard_tokens}, {"valid_fraction", s.valid_fraction}, {"split_key", s.split_key},
          {"inputs", inputs}};
}

json to_json(const InputPosition& at) {
  return {{"file", at.file}, {"offset", at.offset}, {"doc", at.doc}, {"line", at.line}, {"mid_doc", at.mid_doc}};
}

InputPosition position_from(const json& at) {
  return InputPosition{at.at("file").get<std::uint64_t>(), at.at("offset").get<std::uint64_t>(),
                       at.at("doc").get<std::uint64_t>(), at.at("line").get<std::uint64_t>(),
                       at.at("mid_doc").get<bool>()};
}

json to_json(const JournalCounts& c) { return {{"tokens", c.tokens}, {"docs", c.docs}, {"runs", c.runs}}; }

JournalCounts counts_from(const json& j) {
  return {j.at("tokens").get<std::uint64_t>(), j.at("docs").get<std::uint64_t>(), j.at("runs").get<std::uint64_t>()};
}

// The file's JSON, or null when it does not exist.
json read_json(const std::filesystem::path& path) {
  const std::optional<std::string> text = read_file(path);
  return text ? json::parse(*text) : json(nullptr);
}

ZtokSettings settings_from(const json& j) {
  ZtokSettings s;
  s.vocab_hash = j.at("vocab_hash").get<std::string>();
  s.format = j.at("format").get<std::string>();
  s.field = j.at("field").get<std::string>();
  s.split = j.at("split").get<std::string>();
  s.shard_tokens = j.at("shard_tokens").get<std::uint64_t>();
  s.valid_fraction = j.at("valid_fraction").get<double>();
  s.split_key = j.value("split_key", std::string("as-given"));  // absent: an older ztok's rule
  for (const json& in : j.at("inputs")) {
    s.inputs.emplace_back(in.at("name").get<std::string>(), in.at("bytes").get<std::uint64_t>());
    if (in.contains("modified_ns")) s.modified_ns.push_back(in.at("modified_ns").get<std::int64_t>());
  }
  if (s.modified_ns.size() != s.inputs.size()) s.modified_ns.clear();  // absent before ztok recorded them
  return s;
}

// How to start over in `out`: delete it, unless it holds inputs (`ztok --out d 'd/*'`): then remove ztok's
// files from it.
std::string start_over(const std::filesystem::path& out, const ZtokSettings& settings) {
  std::error_code ec;
  const auto dir = std::filesystem::weakly_canonical(out, ec);
  for (const auto& [name, bytes] : settings.inputs) {
    std::filesystem::path parent = std::filesystem::path(name).parent_path();
    if (!ec && std::filesystem::weakly_canonical(parent.empty() ? "." : parent, ec) == dir && !ec)
      return cat("remove ztok's files from ", out.string(), " (train_*.h5, valid_*.h5, ", kProgressFile,
                 ", .ztok/; not the directory: it holds inputs) to start over");
  }
  return cat("delete ", out.string(), " to start over");
}

}  // namespace

void save_progress(const std::filesystem::path& dir, const ZtokProgress& p) {
  const json j = {{"format", "ztok-progress"}, {"version", 1}, {"settings", to_json(p.settings)},
                  {"train", to_json(p.train)}, {"valid", to_json(p.valid)},
                  {"documents", p.documents}, {"replacements", p.replacements}, {"complete", p.complete},
                  {"ranks", p.ranks}, {"run_id", p.run_id}};
  write_progress_file(dir / kProgressFile, j.dump(1) + "\n");
}

std::optional<ZtokProgress> load_progress(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kProgressFile;
  try {
    const json j = read_json(path);
    if (j.is_null()) return std::nullopt;
    if (j.at("format") != "ztok-progress" || j.at("version") != 1) throw InputError("not a ztok progress file, version 1");
    ZtokProgress p;
    p.settings = settings_from(j.at("settings"));
    p.train = totals_from(j.at("train"));
    p.valid = totals_from(j.at("valid"));
    p.documents = j.at("documents").get<std::uint64_t>();
    p.replacements = j.at("replacements").get<std::uint64_t>();
    p.complete = j.at("complete").get<bool>();
    p.ranks = j.value("ranks", std::uint64_t{1});  // absent before multi-rank runs existed
    p.run_id = j.value("run_id", std::uint64_t{0});
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
  if (a.valid_fraction > 0 && a.split_key != b.split_key)
    return cat("the --valid-fraction split names inputs ", a.split_key == "as-given" ? "by their paths as typed (an older ztok)" : "by their file names",
               " vs ", b.split_key == "as-given" ? "by their paths as typed" : "by their file names");
  if (a.inputs.size() != b.inputs.size()) return cat(a.inputs.size(), " inputs vs ", b.inputs.size());
  for (std::size_t i = 0; i < a.inputs.size(); ++i)
    if (a.inputs[i] != b.inputs[i])
      return cat("input ", i + 1, ": ", a.inputs[i].first, " (", a.inputs[i].second, " bytes) vs ", b.inputs[i].first,
                 " (", b.inputs[i].second, " bytes)");
  if (a.modified_ns.size() == a.inputs.size() && b.modified_ns.size() == b.inputs.size())
    for (std::size_t i = 0; i < a.inputs.size(); ++i)
      if (a.modified_ns[i] != b.modified_ns[i])
        return cat("input ", i + 1, ": ", a.inputs[i].first, " was modified since that run read it (same size, another "
                   "modification time)");
  return "";
}

ZtokProgress start_or_resume(const std::filesystem::path& out, const ZtokSettings& settings, std::uint64_t ranks) {
  std::filesystem::create_directories(out);
  if (std::optional<ZtokProgress> saved = load_progress(out)) {
    const std::string diff = settings_difference(saved->settings, settings);
    if (!diff.empty())
      throw InputError(cat("--out ", out.string(), " holds a ztok run with other settings (", diff,
                           "); shards made two ways must not mix: use another --out, or ", start_over(out, settings)));
    if (!saved->complete && saved->ranks != ranks)
      throw InputError(cat("--out ", out.string(), " holds an interrupted ztok run on ", saved->ranks, " rank(s), not ",
                           ranks, ": resume it on as many (",
                           saved->ranks == 1 ? std::string("plain ztok, no mpirun") : cat("mpirun -np ", saved->ranks),
                           "), or ", start_over(out, settings)));
    return *saved;
  }
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if ((name.rfind("train_", 0) == 0 || name.rfind("valid_", 0) == 0) && entry.path().extension() == ".h5")
      throw InputError(cat("--out ", out.string(), " already holds shards (", name, ") but no ", kProgressFile,
                           ": use an empty --out directory"));
  }
  std::filesystem::remove_all(out / ".ztok");  // journals of a run whose progress file is gone
  ZtokProgress fresh;
  fresh.settings = settings;
  fresh.ranks = ranks;
  fresh.run_id = (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}() ^
                 static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  save_progress(out, fresh);  // before any shard exists: a killed first run is resumable, not "foreign"
  return fresh;
}

// --- ranks ------------------------------------------------------------------------------------------

std::filesystem::path rank_progress_path(const std::filesystem::path& out, std::uint64_t rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank_%05llu.json", static_cast<unsigned long long>(rank));
  return out / ".ztok" / name;
}

void save_rank_progress(const std::filesystem::path& out, const RankProgress& p) {
  const json j = {{"format", "ztok-rank-progress"}, {"version", 1}, {"rank", p.rank},
                  {"inputs", {p.first_input, p.end_input}}, {"position", to_json(p.position)},
                  {"train", to_json(p.train)}, {"valid", to_json(p.valid)},
                  {"shards_cut", {p.train_shards, p.valid_shards}}, {"documents", p.documents},
                  {"replacements", p.replacements}, {"input_bytes", p.input_bytes}, {"done", p.done}};
  write_progress_file(rank_progress_path(out, p.rank), j.dump(1) + "\n");
}

std::optional<RankProgress> load_rank_progress(const std::filesystem::path& out, std::uint64_t rank) {
  const std::filesystem::path path = rank_progress_path(out, rank);
  try {
    const json j = read_json(path);
    if (j.is_null()) return std::nullopt;
    if (j.at("format") != "ztok-rank-progress" || j.at("version") != 1 || j.at("rank") != rank)
      throw InputError(cat("not rank ", rank, "'s ztok progress file, version 1"));
    RankProgress p;
    p.rank = rank;
    p.first_input = j.at("inputs").at(0).get<std::uint64_t>();
    p.end_input = j.at("inputs").at(1).get<std::uint64_t>();
    p.position = position_from(j.at("position"));
    p.train = counts_from(j.at("train"));
    p.valid = counts_from(j.at("valid"));
    const json cut = j.value("shards_cut", json::array({0, 0}));  // absent before ztok had one pipeline
    p.train_shards = cut.at(0).get<std::uint64_t>();
    p.valid_shards = cut.at(1).get<std::uint64_t>();
    p.documents = j.at("documents").get<std::uint64_t>();
    p.replacements = j.at("replacements").get<std::uint64_t>();
    p.input_bytes = j.at("input_bytes").get<std::uint64_t>();
    p.done = j.at("done").get<bool>();
    return p;
  } catch (const std::exception& e) {
    throw InputError(cat(path.string(), " is damaged (", e.what(), "): delete ", out.string(), " and start over"));
  }
}

// --- progress line ----------------------------------------------------------------------------------

ProgressMeter::ProgressMeter(bool enabled, std::uint64_t total_bytes)
    : enabled_(enabled), tty_(::isatty(2)), total_(total_bytes) {}

bool ProgressMeter::due() const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return enabled_ && elapsed - shown_ >= (tty_ ? 1.0 : 30.0);
}

void ProgressMeter::update(std::uint64_t bytes, std::uint64_t tokens, bool last) {
  if (!enabled_ || (!last && !due())) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  shown_ = elapsed;
  const double mb_per_s = (bytes - std::min(first_bytes_, bytes)) / 1e6 / std::max(elapsed, 1e-9);
  const double eta = mb_per_s > 0 ? (total_ - std::min(bytes, total_)) / 1e6 / mb_per_s : 0;
  std::fprintf(stderr, "%sztok: %5.1f%%  %.1f / %.1f MB  %.1f MB/s  %.2fM tokens  ETA %d:%02d:%02d%s",
               tty_ ? "\r" : "", total_ ? 100.0 * bytes / total_ : 100.0, bytes / 1e6, total_ / 1e6, mb_per_s,
               tokens / 1e6, int(eta) / 3600, int(eta) / 60 % 60, int(eta) % 60, tty_ && !last ? "" : "\n");
}

RanksProgressLine::RanksProgressLine(bool enabled, std::filesystem::path out, int ranks, std::uint64_t total_bytes)
    : meter_(enabled, total_bytes), out_(std::move(out)), ranks_(ranks) {
  if (!enabled) return;
  read_peers(0);
  meter_.start_at(peer_bytes_);  // what earlier invocations read: MB/s and ETA are this one's
  read_peers(1);
}

void RanksProgressLine::update(std::uint64_t own_bytes, std::uint64_t own_tokens) {
  if (!meter_.due()) return;
  if (std::chrono::steady_clock::now() - read_at_ >= std::chrono::seconds(5)) read_peers(1);
  meter_.update(own_bytes + peer_bytes_, own_tokens + peer_tokens_);
}

void RanksProgressLine::read_peers(int first_rank) {
  peer_bytes_ = peer_tokens_ = 0;
  for (int r = first_rank; r < ranks_; ++r)
    if (const std::optional<RankProgress> p = load_rank_progress(out_, static_cast<std::uint64_t>(r))) {
      peer_bytes_ += p->input_bytes;
      peer_tokens_ += p->train.tokens + p->valid.tokens;
    }
  read_at_ = std::chrono::steady_clock::now();
}

}  // namespace zt::ztok
