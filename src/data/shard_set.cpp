// Shard globs and the concatenated stream over them.
#include "data/shard_set.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
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
// A shard in messages: its path, and the key that named it ("data.valid") where there is one.
std::string named(const ShardInfo& s, const std::string& key) {
  return cat(s.path.string(), key.empty() ? "" : cat(" (", key, ")"));
}

// InputError unless the two shards were tokenized with the same vocabulary (their special ids past it
// are SpecialsUnion's).
void check_same_vocabulary_hash(const ShardInfo& first, const ShardInfo& other, const std::string& first_key = "",
                                const std::string& other_key = "") {
  if (first.tokenizer.vocab_hash == other.tokenizer.vocab_hash) return;
  throw InputError(cat("shards ", named(first, first_key), " and ", named(other, other_key),
                       " were tokenized with different vocabularies (vocab_hash ", first.tokenizer.vocab_hash, " and ",
                       other.tokenizer.vocab_hash, "): shards read by one model must share one; tokenize them with "
                       "the same ztok --vocab"));
}

// Plain and instruction shards, shards packed for different windows, or tokenized with different
// vocabularies (the same ids would mean other tokens), do not mix in one stream: one glob's shards, or
// the corpora of a data.train blend. (Their special ids past the vocabulary: SpecialsUnion.)
void check_same_kind(const ShardInfo& first, const ShardInfo& other) {
  check_same_vocabulary_hash(first, other);
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

// A shard's `specials` record as (name, id) pairs; a record that is not "NAME=ID,..." is a damaged shard.
std::vector<std::pair<std::string, std::uint64_t>> parse_specials(const std::string& record, const std::string& where) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  std::stringstream list(record);
  for (std::string item; std::getline(list, item, ',');) {
    const std::size_t eq = item.rfind('=');
    std::uint64_t id = 0;
    std::size_t used = 0;
    try {
      if (eq != std::string::npos && eq > 0 && eq + 1 < item.size()) id = std::stoull(item.substr(eq + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || eq + 1 + used != item.size() || item[eq + 1] == '-')
      throw InputError(cat("shard ", where, ": attribute specials \"", record, "\" is not NAME=ID,...: write it again "
                           "with ztok"));
    out.emplace_back(item.substr(0, eq), id);
  }
  return out;
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
  check_same_vocabulary_hash(first, other, first_key, other_key);
  SpecialsUnion both;
  both.add(first.tokenizer.specials, named(first, first_key));
  both.add(other.tokenizer.specials, named(other, other_key));
}

namespace {
constexpr const char* kSpecialsFix =
    "shards read by one model must give each special token one id and each id one name; tokenize them with the same "
    "ztok --vocab and --special ids (one list adding specials to another's is fine)";
}  // namespace

void SpecialsUnion::note(bool recorded, const std::string& record, const std::string& where) {
  std::string& from = recorded ? some_from_ : none_from_;
  if (from.empty()) from = where;
  if (recorded && some_record_.empty()) some_record_ = record;
  if (none_from_.empty() || some_from_.empty()) return;
  throw InputError(cat("shards ", some_from_, " and ", none_from_, " share a vocabulary, but the first records the special "
                       "ids declared past it (", some_record_, ") and the second records none (a shard of a ztok before "
                       "2026-12 records none, so what its ids past the vocabulary mean is unknown): tokenize them again "
                       "with this ztok and the same --special ids"));
}

void SpecialsUnion::add_one(const std::string& name, std::uint64_t id, const std::string& where) {
  if (const auto it = by_name_.find(name); it != by_name_.end()) {
    if (it->second.first == id) return;
    throw InputError(cat("shards ", it->second.second, " and ", where, " share a vocabulary but give the special token ",
                         name, " two ids (", it->second.first, " in the first, ", id, " in the second): ", kSpecialsFix));
  }
  if (const auto it = name_of_.find(id); it != name_of_.end())
    throw InputError(cat("shards ", by_name_.at(it->second).second, " and ", where, " share a vocabulary but give id ", id,
                         " two names (", it->second, " in the first, ", name, " in the second): ", kSpecialsFix));
  by_name_.emplace(name, std::make_pair(id, where));
  name_of_.emplace(id, name);
}

void SpecialsUnion::add(const std::string& record, const std::string& where) {
  note(!record.empty(), record, where);
  for (const auto& [name, id] : parse_specials(record, where)) add_one(name, id, where);
}

void SpecialsUnion::add(const SpecialsUnion& other) {
  if (!other.none_from_.empty()) note(false, "", other.none_from_);
  if (!other.some_from_.empty()) note(true, other.some_record_, other.some_from_);
  for (const auto& [id, name] : other.name_of_) add_one(name, id, other.by_name_.at(name).second);
}

std::string SpecialsUnion::text() const {
  std::string out;
  for (const auto& [id, name] : name_of_) out += cat(out.empty() ? "" : ",", name, "=", id);
  return out;
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
      specials_.add(shards_.back().info().tokenizer.specials, p);
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
  if (data_train.empty()) return "";
  // Every shard's, not the first's: a corpus made with more --special entries may come later.
  static std::mutex mutex;
  static std::map<std::string, std::string> read;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = read.find(data_train); it != read.end()) return it->second;
  // A shard that cannot be read is the data checks' to name; a conflict is refused here as there.
  SpecialsUnion all;
  std::vector<std::string> paths;
  try {
    for (const CorpusSpec& spec : parse_blend(data_train, "data.train"))
      for (std::string& path : expand_globs(spec.glob, "data.train")) paths.push_back(std::move(path));
  } catch (const Error&) {
    return "";
  }
  for (const std::string& path : paths) {
    std::string record;
    try {
      const std::lock_guard<std::mutex> hdf5(hdf5_read_mutex());
      record = ShardReader::validate(path).tokenizer.specials;
    } catch (const Error&) {
      return "";
    }
    all.add(record, path);
  }
  return read.emplace(data_train, all.text()).first->second;
}

std::shared_ptr<const TokenSource> open_shards(const std::string& patterns, const std::string& key,
                                               const ShardExpectation& expect) {
  return open_shard_set(patterns, key, expect);
}

std::vector<Corpus> open_corpora(const std::string& value, const std::string& key, const ShardExpectation& expect) {
  std::vector<Corpus> out;
  SpecialsUnion specials;  // over every corpus: one model reads them all
  for (const CorpusSpec& spec : parse_blend(value, key)) {
    out.push_back({spec, open_shard_set(spec.glob, key, expect)});
    const ShardInfo &first = out.front().shards->first_info(), &other = out.back().shards->first_info();
    check_same_kind(first, other);
    specials.add(out.back().shards->specials());
  }
  return out;
}

}  // namespace zt::data
