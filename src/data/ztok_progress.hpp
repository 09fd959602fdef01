// OUT/ztok-progress.json: what a ztok run has durably done, written atomically at checkpoints. A rerun
// with the same settings resumes from it; one with other settings is refused rather than mixing
// shards made two ways.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/corpus.hpp"
#include "data/shard_stream.hpp"

namespace zt::data {

// Everything that decides the output bytes (the thread count does not).
struct ZtokSettings {
  std::string vocab_hash;
  std::string format;  // text | jsonl
  std::string field;
  std::string split;   // file | paragraph
  std::uint64_t shard_tokens = 0;
  double valid_fraction = 0;
  std::vector<std::pair<std::string, std::uint64_t>> inputs;  // name as given, size in bytes
  bool operator==(const ZtokSettings&) const = default;
};

struct ZtokProgress {
  ZtokSettings settings;
  InputPosition position;  // input read and written up to here
  ShardStream::State train, valid;
  std::uint64_t documents = 0;
  std::uint64_t replacements = 0;
  bool complete = false;
};

inline constexpr const char* kProgressFile = "ztok-progress.json";

// Reads DIR/ztok-progress.json; nullopt when absent. A damaged file is a zt::InputError.
std::optional<ZtokProgress> load_progress(const std::filesystem::path& dir);
void save_progress(const std::filesystem::path& dir, const ZtokProgress& progress);
// "" when equal, else which setting differs and how (for the refusal message).
std::string settings_difference(const ZtokSettings& saved, const ZtokSettings& now);

}  // namespace zt::data
