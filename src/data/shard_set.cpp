// Shard globs and the concatenated stream over them.
#include "data/shard_set.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/sha256.hpp"
#include "io/fd_limit.hpp"

namespace zt::data {
namespace {
// HDF5 may be built without thread safety; the training and evaluation loaders read from their own
// threads, so every HDF5 call of a shard set goes through one lock (reads of verified chunks make none).
std::mutex& hdf5_read_mutex() {
  static std::mutex m;
  return m;
}

// HDF5 keeps about 530 KiB of its own per open file (BENCHMARKS.md "Memory per open shard"): 10,000
// shards held open would cost 5 GB a rank. At most `limit` shard files are open through HDF5 at once,
// across every shard set of the process; the least recently used one is closed (ShardReader::close_file:
// its verified chunks stay readable without HDF5) and opened again when a read needs HDF5. Under
// hdf5_read_mutex.
class OpenFiles {
 public:
  // `shard` is about to call into HDF5: it becomes the most recently used, and is open or will open.
  void use(const ShardReader& shard) {
    if (!open_.empty() && open_.back() == &shard) return;
    if (const auto at = std::find(open_.begin(), open_.end(), &shard); at != open_.end()) open_.erase(at);
    open_.push_back(&shard);
    trim();
  }
  void forget(const ShardReader& shard) { std::erase(open_, &shard); }
  std::size_t limit() const { return limit_; }
  void set_limit(std::size_t n) {
    limit_ = std::max<std::size_t>(n, 1);
    trim();
  }

 private:
  void trim() {
    while (open_.size() > limit_) {
      open_.front()->close_file();
      open_.erase(open_.begin());
    }
  }
  std::vector<const ShardReader*> open_;  // least recently used first
  std::size_t limit_ = kDefaultOpenShards;
};

OpenFiles& open_files() {
  static OpenFiles files;
  return files;
}
// Plain and instruction shards, shards packed for different windows, or tokenized with different
// vocabularies (the same ids would mean other tokens), do not mix in one stream: one glob's shards, or
// the corpora of a data.train blend.
void check_same_kind(const ShardInfo& first, const ShardInfo& other) {
  check_same_vocabulary(first, other);
  if (first.has_loss_mask != other.has_loss_mask)
    throw InputError(cat("shards ", first.path.string(), " and ", other.path.string(), " are of different kinds (",
                         first.has_loss_mask ? "instruction data with" : "plain text without", " a loss_mask, then ",
                         other.has_loss_mask ? "one with" : "one without",
                         "): give instruction shards and plain shards in separate runs"));
  if (first.window != other.window)
    throw InputError(cat("shards ", first.path.string(), " and ", other.path.string(),
                         " were packed for different windows (", first.window, " and ", other.window,
                         " tokens; 0: not packed): write them with the same ztok --pack --seq-len"));
}

// An InputError naming `key` when a directory holding some of `paths` has a ztok-progress.json whose
// run did not finish.
void check_ztok_finished(const std::vector<std::string>& paths, const std::string& key) {
  std::set<std::filesystem::path> dirs;
  for (const std::string& p : paths) dirs.insert(std::filesystem::path(p).parent_path());
  for (const std::filesystem::path& dir : dirs) {
    const std::filesystem::path progress = (dir.empty() ? "." : dir) / kZtokProgressFile;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(progress, ec)) continue;  // shards moved out, or another writer's
    std::ifstream in(progress);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    const std::string out = (dir.empty() ? "." : dir).string();
    // A file ztok cannot read either (damaged, truncated) may be an unfinished run's: not taken as finished.
    if (!j.is_object())
      throw InputError(cat(key, ": ", progress.string(), " cannot be read (damaged or truncated), so the ztok run that ",
                           "writes ", out, " may not have finished: run ztok again into an empty --out, or move the "
                           "shards out of that directory to train on them as they are"));
    if (j.value("complete", true) == false) {
      // An instruction run (settings.format "instruct") does not resume: it is started over.
      const bool instruct = j.contains("settings") && j["settings"].is_object() &&
                            j["settings"].value("format", std::string()) == "instruct";
      throw InputError(cat(key, ": the ztok run that writes ", out, " did not finish (", progress.string(),
                           " says \"complete\": false): its shards hold part of the input. ",
                           instruct ? cat("Remove its shards and ztok-progress.json and run the ztok command again (an "
                                          "instruction run does not resume)")
                                    : std::string("Run the same ztok command again (it resumes where it stopped)"),
                           ", or move the shards out of that directory to train on them as they are"));
    }
  }
}
}  // namespace

void check_same_vocabulary(const ShardInfo& first, const ShardInfo& other, const std::string& first_key,
                           const std::string& other_key) {
  const auto named = [](const ShardInfo& s, const std::string& key) {
    return cat(s.path.string(), key.empty() ? "" : cat(" (", key, ")"));
  };
  if (first.tokenizer.vocab_hash == other.tokenizer.vocab_hash) {
    if (first.tokenizer.specials == other.tokenizer.specials) return;
    // A shard of an older ztok records no specials: what its declared ids mean is unknown, so it is not
    // mixed with one that records them either.
    const auto listed = [](const std::string& s) { return s.empty() ? std::string("none recorded") : s; };
    throw InputError(cat("shards ", named(first, first_key), " and ", named(other, other_key), " share a vocabulary but "
                         "give its special ids past it other meanings (specials ", listed(first.tokenizer.specials),
                         " and ", listed(other.tokenizer.specials), "; a shard of a ztok before 2026-12 records none): "
                         "shards read by one model must agree; tokenize them with the same ztok --special list"));
  }
  throw InputError(cat("shards ", named(first, first_key), " and ", named(other, other_key),
                       " were tokenized with different vocabularies (vocab_hash ", first.tokenizer.vocab_hash, " and ",
                       other.tokenizer.vocab_hash, "): shards read by one model must share one; tokenize them with "
                       "the same ztok --vocab"));
}

std::vector<std::string> expand_globs(const std::string& patterns, const std::string& key) {
  std::vector<std::string> out;
  std::stringstream list(patterns);
  for (std::string pattern; std::getline(list, pattern, ',');) {
    if (pattern.empty()) continue;
    glob_t g{};
    const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
    globfree(&g);
    if (matches.empty())
      throw InputError(cat(key, "='", pattern, "' matches no file: write the shards with ztok, or fix the path",
                           patterns.find(',') != std::string::npos
                               ? " (a ',' separates globs, so a path holding one is cut there: rename that directory)"
                               : ""));
    std::sort(matches.begin(), matches.end());  // byte order: file-name order is token order
    out.insert(out.end(), matches.begin(), matches.end());
  }
  if (out.empty()) throw InputError(cat(key, " is empty: give a glob of shards written by ztok"));
  std::vector<std::string> sorted = out;  // a shard two globs match is read twice: say so (a mistake, or meant)
  std::sort(sorted.begin(), sorted.end());
  if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
    log::warn(cat(key, "='", patterns, "': ", *twice, " is matched by more than one glob and is read as often as it is "
                  "matched (to weight corpora, give a blend: W1:GLOB1,W2:GLOB2)"));
  return out;
}

void limit_open_shards(std::size_t files) {
  std::lock_guard<std::mutex> lock(hdf5_read_mutex());
  open_files().set_limit(files);
}

ShardSet::ShardSet(const std::vector<std::string>& paths, const ShardExpectation& expect) {
  std::lock_guard<std::mutex> lock(hdf5_read_mutex());
  // A descriptor per shard for the verified reads, and HDF5's for the open ones: ~1000 shards pass the
  // usual soft limit of 1024.
  if (!paths.empty())
    io::make_room_for_files(paths.size() + std::min(paths.size(), open_files().limit()),
                            cat(paths.size(), " shards (", paths.front(), ", ...)"));
  shards_.reserve(paths.size());  // the open-file list points at them
  try {
    for (const std::string& p : paths) {
      shards_.push_back(ShardReader::open(p, expect));
      open_files().use(shards_.back());
      starts_.push_back(total_);
      total_ += shards_.back().info().n_tokens;
      check_same_kind(shards_.front().info(), shards_.back().info());
    }
  } catch (...) {
    // No destructor runs for a set that was never made: its shards leave the open-file list here, or
    // the list would point at freed readers (a later set's trim closed them: a crash).
    for (const ShardReader& shard : shards_) open_files().forget(shard);
    throw;
  }
  starts_.push_back(total_);
}

ShardSet::~ShardSet() {
  std::lock_guard<std::mutex> lock(hdf5_read_mutex());
  for (const ShardReader& shard : shards_) open_files().forget(shard);
}

const ShardInfo& ShardSet::first_info() const { return shards_.front().info(); }

std::vector<std::string> ShardSet::unchecksummed() const {
  std::vector<std::string> out;
  for (const ShardReader& shard : shards_)
    if (!shard.info().checksummed) out.push_back(shard.info().path.string());
  return out;
}

std::vector<std::filesystem::path> ShardSet::paths() const {
  std::vector<std::filesystem::path> out;
  for (const ShardReader& shard : shards_) out.push_back(shard.info().path);
  return out;
}

ShardSetPrint ShardSet::fingerprint() const {
  Sha256 hash;
  for (const ShardReader& shard : shards_) {
    const ShardInfo& i = shard.info();
    // specials only where recorded: the fingerprints of older runs' shards stay what they were.
    hash.update(cat(i.path.filename().string(), '\0', i.n_tokens, '\0', i.n_docs, '\0', i.tokenizer.vocab_hash,
                    i.tokenizer.specials.empty() ? "" : cat('\0', i.tokenizer.specials), '\n'));
  }
  return {shards_.size(), total_, to_hex(hash.finish())};
}

void ShardSet::read(std::uint64_t start, std::uint64_t count, std::int32_t* out) const {
  ZT_CHECK_LE(start + count, total_, "read past the end of the token stream");
  // The shard holding `start`, then forward across shard boundaries.
  std::size_t s = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin()) - 1;
  while (count > 0) {
    const std::uint64_t offset = start - starts_[s];
    const std::uint64_t n = std::min(count, starts_[s + 1] - start);
    const std::span<std::int32_t> piece(out, n);
    if (!shards_[s].read_verified(offset, piece)) {  // chunks read before: plain pread, no lock
      std::lock_guard<std::mutex> lock(hdf5_read_mutex());
      open_files().use(shards_[s]);
      shards_[s].read(offset, piece);
    }
    out += n;
    start += n;
    count -= n;
    ++s;
  }
}

void ShardSet::read_loss_mask(std::uint64_t start, std::uint64_t count, std::uint8_t* out) const {
  ZT_CHECK_LE(start + count, total_, "read past the end of the token stream");
  std::lock_guard<std::mutex> lock(hdf5_read_mutex());
  std::size_t s = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin()) - 1;
  while (count > 0) {
    const std::uint64_t n = std::min(count, starts_[s + 1] - start);
    open_files().use(shards_[s]);
    shards_[s].read_loss_mask(start - starts_[s], std::span<std::uint8_t>(out, n));
    out += n;
    start += n;
    count -= n;
    ++s;
  }
}

std::vector<std::uint64_t> ShardSet::document_starts(std::uint64_t start, std::uint64_t count) const {
  {
    std::lock_guard<std::mutex> lock(hdf5_read_mutex());
    if (!doc_starts_loaded_) {
      for (std::size_t s = 0; s < shards_.size(); ++s) {
        open_files().use(shards_[s]);
        for (const std::uint64_t d : shards_[s].doc_offsets()) doc_starts_.push_back(starts_[s] + d);
      }
      doc_starts_loaded_ = true;
    }
  }
  const auto first = std::lower_bound(doc_starts_.begin(), doc_starts_.end(), start);
  return {first, std::lower_bound(first, doc_starts_.end(), start + count)};
}

std::string ShardSet::describe() const {
  const ShardInfo& first = shards_.front().info();
  return cat(total_, " tokens in ", shards_.size(), " shard(s) starting with ", first.path.string(),
             first.has_loss_mask ? cat(" (instruction data, loss mask", first.window ? cat(", packed in windows of ", first.window) : "", ")") : "");
}

std::shared_ptr<ShardSet> open_shard_set(const std::string& patterns, const std::string& key,
                                         const ShardExpectation& expect) {
  const std::vector<std::string> paths = expand_globs(patterns, key);
  check_ztok_finished(paths, key);
  return std::make_shared<ShardSet>(paths, expect);
}

namespace {
// data.train's first shard's attributes, or none when there is no such key or its shards cannot be read.
std::optional<ShardInfo> first_train_shard(const std::string& data_train) {
  if (data_train.empty()) return std::nullopt;
  try {
    const std::vector<std::string> shards = expand_globs(parse_blend(data_train, "data.train").front().glob, "data.train");
    return ShardReader::validate(shards.front());
  } catch (const Error&) {
    return std::nullopt;
  }
}
}  // namespace

std::string recorded_chat_template(const std::string& data_train) {
  const std::optional<ShardInfo> first = first_train_shard(data_train);
  return first ? first->chat_template : "";
}

std::string recorded_specials(const std::string& data_train) {
  const std::optional<ShardInfo> first = first_train_shard(data_train);
  return first ? first->tokenizer.specials : "";
}

std::shared_ptr<const TokenSource> open_shards(const std::string& patterns, const std::string& key,
                                               const ShardExpectation& expect) {
  return open_shard_set(patterns, key, expect);
}

std::vector<Corpus> open_corpora(const std::string& value, const std::string& key, const ShardExpectation& expect) {
  std::vector<Corpus> out;
  for (const CorpusSpec& spec : parse_blend(value, key)) {
    out.push_back({spec, open_shard_set(spec.glob, key, expect)});
    const ShardInfo &first = out.front().shards->first_info(), &other = out.back().shards->first_info();
    check_same_kind(first, other);
  }
  return out;
}

}  // namespace zt::data
