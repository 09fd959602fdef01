// One split's output (train or valid): appended ids are cut into shards of exactly shard_tokens
// (only the last may be shorter). The open shard's ids and document offsets are kept in journal
// files (OUT/.ztok/) until the shard is complete, so a killed run resumes from its last saved state
// with the journal truncated back to that state.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "data/shard.hpp"

namespace zt::ztok {

// "train", 3 -> "train_000003.h5": a split's shard file names, in token order as bytes.
std::string shard_file_name(const std::string& prefix, std::uint64_t index);

class ShardStream {
 public:
  struct State {  // what ztok-progress.json records for a split
    std::uint64_t shard = 0;           // index of the open shard (= shards completed)
    std::uint64_t tokens = 0;          // ids in its journal
    std::uint64_t docs = 0;            // document offsets in its journal
    std::vector<std::string> sources;  // inputs that gave it ids, in order
    std::uint64_t total_tokens = 0;    // over every shard of the split
    std::uint64_t total_docs = 0;
  };

  // prefix: "train" or "valid" -> DIR/train_000000.h5, ...
  ShardStream(std::filesystem::path dir, std::string prefix, data::TokenizerInfo tokenizer, std::uint64_t shard_tokens,
              const State& resume);
  ~ShardStream();
  ShardStream(const ShardStream&) = delete;
  ShardStream& operator=(const ShardStream&) = delete;

  void begin_document();  // the next id appended starts a document
  void append(std::span<const std::uint32_t> ids, const std::string& source);
  // Writes the open shard when it holds any id (the split's last shard). Its journal goes at the
  // next saved(), once the progress file records the split as complete.
  void finish();
  // Makes the journals durable and returns the state to save. After the save, call saved().
  State sync();
  void saved();  // removes the journals of shards completed before the saved state
  std::uint64_t shards_completed() const { return state_.shard; }
  std::uint64_t total_tokens() const { return state_.total_tokens; }
  std::filesystem::path shard_path(std::uint64_t index) const;

 private:
  void open_journal(bool truncate_to_state);
  void close_journal();
  void complete_shard();
  std::filesystem::path journal_path(std::uint64_t index, const char* kind) const;

  std::filesystem::path dir_;
  std::string prefix_;
  data::TokenizerInfo tokenizer_;
  std::uint64_t shard_tokens_;
  bool wide_;
  State state_;
  bool pending_doc_ = false;
  std::FILE* tokens_ = nullptr;
  std::FILE* docs_ = nullptr;
  std::vector<std::uint64_t> obsolete_;  // completed shards whose journals await saved()
  std::vector<std::uint16_t> narrow_;    // conversion scratch
};

}  // namespace zt::ztok
