// One rank's share of one split in a ztok run (job.hpp), before shards are cut from it: the ids in
// input order, where documents start and which input each run of ids came from. Three little-endian
// files: STEM.tokens (uint16, or uint32 above 65536 ids, as the shard stores them), STEM.docs (uint64
// positions of document starts) and STEM.runs (uint64 pairs: input index, first position). Positions
// count from the rank's first id of the split.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <vector>

namespace zt::ztok {

// How much of a journal is durable (recorded in the rank's progress file).
struct JournalCounts {
  std::uint64_t tokens = 0, docs = 0, runs = 0;
  bool operator==(const JournalCounts&) const = default;
};

struct JournalRun {
  std::uint64_t input = 0;  // index into the run's input list
  std::uint64_t first = 0;  // position of its first id
};

class JournalWriter {
 public:
  // Opens the files truncated to `resume` (what the last saved progress recorded; zero: fresh).
  // Files shorter than `resume` are a zt::InputError (the output directory was damaged).
  JournalWriter(std::filesystem::path stem, bool wide, const JournalCounts& resume);
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  void begin_document();  // the next id appended starts a document
  void append(std::span<const std::uint32_t> ids, std::uint64_t input);
  // Hands the buffered entries to the file system, so that a JournalReader sees all of counts().
  void flush();
  // Flushes and fsyncs the files; returns the counts to record as durable.
  JournalCounts sync();
  const JournalCounts& counts() const { return counts_; }
  // Frees the disk blocks of the ids before `position` (a hole: positions and the file size stay),
  // once no resume can read them again. A file system that cannot punch holes keeps them: only disk
  // space is at stake.
  void release_before(std::uint64_t position);

 private:
  void write(int file, const void* data, std::size_t bytes);

  std::filesystem::path stem_;
  bool wide_;
  JournalCounts counts_;
  std::uint64_t last_input_ = ~std::uint64_t{0};  // input of the last run
  std::uint64_t released_ = 0;                    // ids before this are a hole
  bool pending_doc_ = false;
  std::FILE* files_[3] = {nullptr, nullptr, nullptr};  // tokens, docs, runs
  std::vector<std::uint16_t> narrow_;                  // conversion scratch
};

// Random access to a journal's first `counts` entries (any rank's: OUT is on a file system every rank
// sees); a growing journal's writer must flush() first.
class JournalReader {
 public:
  // Checks that the files hold at least `counts` entries (zt::IoError naming the file otherwise).
  JournalReader(std::filesystem::path stem, bool wide, const JournalCounts& counts);
  ~JournalReader();
  JournalReader(const JournalReader&) = delete;
  JournalReader& operator=(const JournalReader&) = delete;

  const JournalCounts& counts() const { return counts_; }
  void tokens(std::uint64_t first, std::span<std::uint32_t> out) const;  // ids [first, first + size)
  std::uint64_t docs_before(std::uint64_t position) const;  // document starts < position
  void docs(std::uint64_t first, std::span<std::uint64_t> out) const;  // document starts [first, ...)
  JournalRun run(std::uint64_t index) const;
  // The runs that hold ids of [from, to), in order (the first may begin before `from`): a binary
  // search, then the runs inside, so a shard costs its own inputs, not the whole journal's.
  std::vector<JournalRun> runs_overlapping(std::uint64_t from, std::uint64_t to) const;

 private:
  void read(int file, std::uint64_t offset, void* out, std::size_t bytes) const;

  std::filesystem::path stem_;
  bool wide_;
  JournalCounts counts_;
  int fds_[3] = {-1, -1, -1};
};

// STEM.tokens, STEM.docs, STEM.runs for file 0, 1, 2.
std::filesystem::path journal_file(const std::filesystem::path& stem, int file);

}  // namespace zt::ztok
