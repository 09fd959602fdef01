// OUT/ztok-progress.json: the run's settings, its number of ranks and, once complete, its totals. A
// rerun with the same settings resumes; one with other settings is refused rather than mixing shards
// made two ways. Each rank's state (one process is rank 0 of 1) is OUT/.ztok/rank_NNNNN.json, written
// atomically at checkpoints. The progress line lives here too.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/shard.hpp"
#include "ztok/corpus.hpp"
#include "ztok/token_journal.hpp"

namespace zt::ztok {

// Everything that decides the output bytes (the thread count does not).
struct ZtokSettings {
  std::string vocab_hash;
  std::string format;  // text | jsonl
  std::string field;
  std::string split;   // file | paragraph
  std::uint64_t shard_tokens = 0;
  double valid_fraction = 0;
  std::vector<std::pair<std::string, std::uint64_t>> inputs;  // name as given, size in bytes
  // Each input's modification time (ns): an input edited in place at the same size is another input.
  // Empty when not recorded (a run of an older ztok): then not compared.
  std::vector<std::int64_t> modified_ns;
  // How --valid-fraction names an input (split_name): "file-name"; "as-given" for runs of an older ztok,
  // which hashed the path as typed (their split cannot be continued by this one).
  std::string split_key = "file-name";
  bool operator==(const ZtokSettings&) const = default;
};

// A split's output, recorded once the run is complete.
struct SplitTotals {
  std::uint64_t shards = 0, tokens = 0, docs = 0;
};

struct ZtokProgress {
  ZtokSettings settings;
  SplitTotals train, valid;  // once complete, as documents and replacements
  std::uint64_t documents = 0;
  std::uint64_t replacements = 0;
  bool complete = false;
  // Ranks the run was started on (1: one process); their state is in RankProgress.
  std::uint64_t ranks = 1;
  // Drawn at random when a run starts: the ranks of a multi-rank run check that they all read the
  // same file (OUT must be shared by every rank).
  std::uint64_t run_id = 0;
};

// One rank's part of a run (OUT/.ztok/rank_NNNNN.json): its block of the input list, how far it has
// tokenized it into its journals and, on a run of one rank, the shards it cut meanwhile.
struct RankProgress {
  std::uint64_t rank = 0;
  std::uint64_t first_input = 0, end_input = 0;  // its inputs [first_input, end_input)
  InputPosition position;                        // within the block (file 0 = first_input)
  JournalCounts train, valid;                    // durable journal entries
  std::uint64_t train_shards = 0, valid_shards = 0;  // shards [0, n) of the split written while tokenizing
  std::uint64_t documents = 0, replacements = 0;
  std::uint64_t input_bytes = 0;                 // of its inputs read (compressed): for the progress line
  bool done = false;                             // its block is tokenized
};

inline constexpr const char* kProgressFile = data::kZtokProgressFile;

// Reads DIR/ztok-progress.json; nullopt when absent. A damaged file is a zt::InputError.
std::optional<ZtokProgress> load_progress(const std::filesystem::path& dir);
void save_progress(const std::filesystem::path& dir, const ZtokProgress& progress);
// "" when equal, else which setting differs and how (for the refusal message).
std::string settings_difference(const ZtokSettings& saved, const ZtokSettings& now);

// The state a run on `ranks` ranks starts from in `out`: the saved one when it has these settings and
// is complete or was started on as many ranks; a fresh one (saved at once, after removing journals of
// older runs) when `out` holds no shards. Anything else is a zt::InputError naming what to delete.
ZtokProgress start_or_resume(const std::filesystem::path& out, const ZtokSettings& settings, std::uint64_t ranks);

std::filesystem::path rank_progress_path(const std::filesystem::path& out, std::uint64_t rank);
std::optional<RankProgress> load_rank_progress(const std::filesystem::path& out, std::uint64_t rank);
void save_rank_progress(const std::filesystem::path& out, const RankProgress& progress);

// One line on stderr, redrawn in place on a terminal, else printed every 30 s: input read (MB, MB/s),
// tokens, ETA. Through RanksProgressLine, which adds the other ranks.
class ProgressMeter {
 public:
  ProgressMeter(bool enabled, std::uint64_t total_bytes);
  void start_at(std::uint64_t bytes) { first_bytes_ = bytes; }  // bytes read before this invocation
  bool due() const;  // whether update() would print now
  void update(std::uint64_t bytes, std::uint64_t tokens, bool last = false);

 private:
  bool enabled_, tty_;
  std::uint64_t total_, first_bytes_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double shown_ = 0;
};

// The progress line on rank 0, over every rank: its own progress as it goes, the others' from their
// progress files (saved every checkpoint_seconds; read again at most every 5 s). Off elsewhere.
class RanksProgressLine {
 public:
  RanksProgressLine(bool enabled, std::filesystem::path out, int ranks, std::uint64_t total_bytes);
  void update(std::uint64_t own_bytes, std::uint64_t own_tokens);
  void finish(std::uint64_t bytes, std::uint64_t tokens) { meter_.update(bytes, tokens, true); }

 private:
  void read_peers(int first_rank);

  ProgressMeter meter_;
  std::filesystem::path out_;
  int ranks_;
  std::chrono::steady_clock::time_point read_at_;
  std::uint64_t peer_bytes_ = 0, peer_tokens_ = 0;
};

}  // namespace zt::ztok
