// Token shards (docs/INTERFACE.md "Shard schema"): one HDF5 file holding a run of token ids, the offsets of
// the documents that start in it, and what the ids mean (tokenizer, vocabulary hash and size, eot).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace zt::data {

inline constexpr const char* kShardFormat = "ztrain-tokens";
inline constexpr std::uint64_t kShardFormatVersion = 1;
// Elements per HDF5 chunk of `tokens`: 32 KiB of uint16, read (and checksummed) whole on any access.
// Small enough that a shuffled 1025-token window reads at most 64 KiB (256K-token chunks cost 512 KiB
// per window and 6x the loader's throughput: tools/bench/loader, BENCHMARKS.md); large enough that a
// 100M-token shard's chunk index stays small.
inline constexpr std::uint64_t kShardChunkTokens = std::uint64_t{1} << 14;

// ztok's record of a run in its --out directory, beside the shards: `"complete": true` once every
// shard of the run is written (ztok/progress.hpp). A reader refuses a directory whose run did not finish.
inline constexpr const char* kZtokProgressFile = "ztok-progress.json";

// Shard ids are uint16 when vocab_size <= 65536, else uint32: the one rule the shard writer, ztok's
// journals and the reader follow (GPT-2's 50257 ids fit; cl100k_base's 100277 and o200k_base's 200019
// do not).
inline constexpr bool shard_ids_are_wide(std::uint64_t vocab_size) { return vocab_size > 65536; }

// What the ids in a shard mean.
struct TokenizerInfo {
  std::string name = "gpt2";  // attribute `tokenizer`: Tokenizer::name(), e.g. "gpt2", "cl100k_base", "hf-bpe"
  std::string vocab_hash;     // identifies the vocabulary: Vocab::hash() (tok/encoding.hpp says what it hashes)
  std::uint64_t vocab_size = 0;
  std::uint64_t eot = 0;      // the end-of-text id after every document
  std::optional<std::uint64_t> bos;  // attribute `bos`, present when every document starts with this id
  // Attribute `specials`, instruction shards only: "NAME=ID,..." (by id) of the special tokens ztok's
  // --special declared past the vocabulary, which vocab_hash does not cover (the same vocabulary may
  // give id 50257 to <|im_start|> in one set and to <|begin_of_text|> in another). "": none (absent).
  std::string specials;
};

// Writes one shard atomically (PATH.tmp, then rename). The token and document counts are declared up
// front; tokens and offsets are appended in order, in blocks of any size (the bytes on disk do not
// depend on the block sizes). Without commit() nothing appears at PATH.
// The fix to print after a write under ztok's --out failed with errno `err`: free space (ENOSPC,
// EDQUOT) or raise the file size limit (EFBIG), then run the same command to resume; "" otherwise.
std::string output_write_fix(int err);
// How those fixes end (plain ztok runs resume); an instruction run, which does not, rewrites it.
inline constexpr const char* kZtokResumeAdvice = "run the same command again: ztok resumes from its last saved state";

// Instruction data (ztok --format instruct): a `loss_mask` dataset (uint8 per token, 1 where the token
// is a training target, chunked and Fletcher-32 checksummed as `tokens`), the chat template's name,
// and for packed shards the window length (model.seq_len + 1) its samples were packed into.
struct InstructLayout {
  bool loss_mask = false;
  std::string chat_template;  // attribute `chat_template`
  std::uint64_t window = 0;   // attribute `window`; 0: not packed (no attribute)
};

class ShardWriter {
 public:
  ShardWriter(const std::filesystem::path& path, const TokenizerInfo& tokenizer, std::uint64_t n_tokens,
              std::uint64_t n_docs, const std::vector<std::string>& sources, const InstructLayout& instruct = {});
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void append_tokens(std::span<const std::uint32_t> tokens);  // each < vocab_size
  void append_doc_offsets(std::span<const std::uint64_t> offsets);
  // Instruction shards only: the mask of the tokens appended so far and next (each 0 or 1).
  void append_loss_mask(std::span<const std::uint8_t> mask);
  // Checks that everything declared was appended, closes, fsyncs and renames into place.
  void commit();

 private:
  void create(const TokenizerInfo& tokenizer, const std::vector<std::string>& sources, const InstructLayout& instruct);
  void append_tokens_unchecked(std::span<const std::uint32_t> tokens);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ShardInfo {
  std::filesystem::path path;
  TokenizerInfo tokenizer;
  std::uint64_t n_tokens = 0;
  std::uint64_t n_docs = 0;
  bool wide_tokens = false;  // stored as uint32 (vocabularies above 65536)
  std::vector<std::string> sources;
  bool has_loss_mask = false;   // instruction data: dataset `loss_mask`
  std::string chat_template;    // instruction data: the template it was rendered with ("" without)
  std::uint64_t window = 0;     // packed instruction data: windows of this many tokens, end to end
  bool checksummed = true;      // `tokens` carries Fletcher-32 (ztok's do; another writer's may not)
};

// What a reader requires of a shard; an unset field is not checked.
struct ShardExpectation {
  std::optional<std::string> vocab_hash;
  std::optional<std::uint64_t> vocab_size;  // the model's: the shard's vocab_size may not exceed it (padding is fine)
  std::optional<std::uint64_t> eot;
};

// Reads a shard after validating it. open() checks, before any token is read: the file is HDF5 with
// format "ztrain-tokens" and format_version 1, the expected vocab_hash / eot, vocab_size at most the
// expected one, n_tokens
// against the length of `tokens`, n_docs against `doc_offsets`, the element types, and that every
// dataset's storage was written and its filters are available (never read as zeros). Every problem
// there (missing, truncated, corrupt, wrong schema, other vocabulary) is a zt::InputError naming the
// file and the fix; a failure in a later read is a zt::DataError naming the file and range.
class ShardReader {
 public:
  static ShardReader open(const std::filesystem::path& path, const ShardExpectation& expect = {});
  // open() + info() + close: checks a shard (e.g. every shard of a glob before training starts).
  static ShardInfo validate(const std::filesystem::path& path, const ShardExpectation& expect = {}) {
    return open(path, expect).info();
  }
  ShardReader(ShardReader&&) noexcept;
  ShardReader& operator=(ShardReader&&) noexcept;
  ~ShardReader();

  const ShardInfo& info() const;
  // Closes the HDF5 file (about 530 KiB of HDF5's own state per open file), keeping what the reads
  // learnt: the info, the verified chunks and their descriptor. The next call that needs HDF5 opens it
  // again and checks it is the same shard (a DataError when it changed on disk). Under the callers'
  // HDF5 lock, as the reads that call into HDF5.
  void close_file() const;
  // Tokens [start, start + out.size()); each is checked to be < vocab_size, and each chunk's
  // Fletcher-32 on its first read (a damaged chunk is a DataError). Chunks are read with pread once
  // HDF5 has said where they lie (verified_chunks.hpp). May call into HDF5 (and open the file again
  // after close_file): callers on several threads serialise their calls.
  void read(std::uint64_t start, std::span<std::uint32_t> out) const;
  void read(std::uint64_t start, std::span<std::int32_t> out) const;
  // As read() when every chunk of the range was checked and located before (a chunk is located on
  // its second read); else false, `out` unspecified. Makes no HDF5 call: safe on any thread without
  // the callers' HDF5 lock.
  bool read_verified(std::uint64_t start, std::span<std::int32_t> out) const;
  // The document offsets, checked to be increasing and < n_tokens.
  std::vector<std::uint64_t> doc_offsets() const;
  // loss_mask [start, start + out.size()) of an instruction shard (info().has_loss_mask), each checked
  // to be 0 or 1; a checksum failure is a DataError naming the file and range. Calls into HDF5.
  void read_loss_mask(std::uint64_t start, std::span<std::uint8_t> out) const;

  struct Impl;  // opaque: HDF5 handles

 private:
  ShardReader();
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt::data
