// The token stream of a split: the shards a glob matches, concatenated in file-name (byte) order
// (docs/INTERFACE.md "Order contract"). Every shard is validated against what the model expects before any
// token is read; a problem names the file and the fix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/blend.hpp"
#include "data/shard.hpp"
#include "data/token_source.hpp"

namespace zt::data {

// How many shard files a process keeps open through HDF5 at once, across every ShardSet (data.open_shards):
// HDF5 holds about 530 KiB per open file. The least recently read is closed beyond it and opened again
// when needed; chunks read twice before are read without HDF5 either way. At least 1.
inline constexpr std::size_t kDefaultOpenShards = 128;
void limit_open_shards(std::size_t files);

// Files matching a glob (or a comma-separated list of globs), each glob's matches sorted by byte
// value, in the order given. No match is an InputError naming `key` (e.g. "data.train").
std::vector<std::string> expand_globs(const std::string& patterns, const std::string& key);

// InputError unless the two shards were tokenized with the same vocabulary (vocab_hash) and their special
// ids past it agree (SpecialsUnion): the same ids would mean other tokens. The keys ("data.train",
// "data.valid") name where each came from, if given.
void check_same_vocabulary(const ShardInfo& first, const ShardInfo& other, const std::string& first_key = "",
                           const std::string& other_key = "");

// The special ids shards declare past their vocabulary (TokenizerInfo::specials, ztok --special), over a
// set of shards: shards made with more --special entries read together with shards made with fewer (a
// token added to a dataset later), and the model sees the union. Only a real conflict is refused: an id
// given two names, or a name given two ids. A shard of a ztok before 2026-12 records none, so what its ids
// past the vocabulary mean is unknown: it joins only shards that record none either.
class SpecialsUnion {
 public:
  // Adds one shard's record ("NAME=ID,..."); `where` names the shard (and its key) in the errors. An
  // InputError naming both shards and the fix on a conflict.
  void add(const std::string& record, const std::string& where);
  void add(const SpecialsUnion& other);
  // The union, "NAME=ID,..." by id, as a shard records it ("" when none is recorded).
  std::string text() const;

 private:
  void note(bool recorded, const std::string& record, const std::string& where);
  void add_one(const std::string& name, std::uint64_t id, const std::string& where);
  std::map<std::string, std::pair<std::uint64_t, std::string>> by_name_;  // name -> (id, the shard that gave it)
  std::map<std::uint64_t, std::string> name_of_;
  std::string none_from_, some_from_, some_record_;  // the first shard recording none, and some (its record)
};

// What identifies a shard set's stream for a resume: the window order depends on it. sha256: hex SHA-256
// over each shard's file name (not its directory: moved data is the same data), n_tokens, n_docs and
// vocab_hash, in stream order.
struct ShardSetPrint {
  std::uint64_t shards = 0, tokens = 0;
  std::string sha256;
};

// The shards of a set must agree on having a loss mask and on the packing window (InputError).
class ShardSet final : public TokenSource {
 public:
  ShardSet(const std::vector<std::string>& paths, const ShardExpectation& expect);
  ~ShardSet() override;
  std::uint64_t n_tokens() const override { return total_; }
  void read(std::uint64_t start, std::uint64_t count, std::int32_t* out) const override;
  std::string describe() const override;
  bool has_loss_mask() const override { return shards_.front().info().has_loss_mask; }
  void read_loss_mask(std::uint64_t start, std::uint64_t count, std::uint8_t* out) const override;
  std::uint64_t packed_window() const override { return shards_.front().info().window; }
  // From every shard's doc_offsets, read (and checked) on the first call.
  std::vector<std::uint64_t> document_starts(std::uint64_t start, std::uint64_t count) const override;
  const ShardInfo& first_info() const;
  ShardSetPrint fingerprint() const;
  // The shards whose tokens carry no Fletcher-32 (another writer's): nothing finds a damaged chunk there.
  std::vector<std::string> unchecksummed() const;
  // Every shard's path, in stream order.
  std::vector<std::filesystem::path> paths() const;
  // The special ids its shards declare past the vocabulary, together.
  const SpecialsUnion& specials() const { return specials_; }

 private:
  std::vector<ShardReader> shards_;
  std::vector<std::uint64_t> starts_;  // first stream position of each shard, plus the total at the end
  std::uint64_t total_ = 0;
  SpecialsUnion specials_;
  mutable std::vector<std::uint64_t> doc_starts_;  // stream positions; loaded once (doc_starts_loaded_)
  mutable bool doc_starts_loaded_ = false;
};

// The shards a split's globs match (`key`: "data.train", "data.valid"), validated; an InputError naming
// `key` when a directory holding some of them has a ztok-progress.json whose run did not finish
// (interrupted, failed: part of the input).
std::shared_ptr<ShardSet> open_shard_set(const std::string& patterns, const std::string& key,
                                         const ShardExpectation& expect);
// The chat template data.train's first shard records (ztok --chat-template; `data_train`: the key's value,
// a glob or a blend), or "" when none or when its shards cannot be read (the data checks say why).
std::string recorded_chat_template(const std::string& data_train);
// The special ids ztok --special declared past the vocabulary over all of data.train's shards, together
// (SpecialsUnion::text, "NAME=ID,..."), or "" when none or when its shards cannot be read. An InputError
// when they conflict, as the data checks say. Read once a process per value.
std::string recorded_specials(const std::string& data_train);

std::shared_ptr<const TokenSource> open_shards(const std::string& patterns, const std::string& key,
                                               const ShardExpectation& expect);

// A corpus of a blend (blend.hpp) and its shards.
struct Corpus {
  CorpusSpec spec;
  std::shared_ptr<const ShardSet> shards;
};
// Opens every corpus of data.train's value (one for an unweighted value). The corpora must share the
// vocabulary (vocab_hash, the special ids past it: SpecialsUnion), the loss-mask kind and the packing
// window: an InputError names both files.
std::vector<Corpus> open_corpora(const std::string& value, const std::string& key, const ShardExpectation& expect);

}  // namespace zt::data
