// A random-access stream of token ids: the concatenation of a split's shards in file-name order
// (shard_set.hpp), or tokens in memory (tests, samples).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual std::uint64_t n_tokens() const = 0;
  // Copies tokens [start, start + count) into out; throws DataError naming the file on a bad read.
  virtual void read(std::uint64_t start, std::uint64_t count, std::int32_t* out) const = 0;
  virtual std::string describe() const = 0;

  // Instruction data (ztok --format instruct): a loss mask, 1 on the tokens the model is trained to
  // produce. Without one every token is a target.
  virtual bool has_loss_mask() const { return false; }
  // Copies loss_mask [start, start + count) into out; only when has_loss_mask().
  virtual void read_loss_mask(std::uint64_t start, std::uint64_t count, std::uint8_t* out) const;
  // Packed instruction data: windows of this many tokens laid end to end, each read whole; 0 for a
  // plain stream (windows overlap by one token).
  virtual std::uint64_t packed_window() const { return 0; }
  // Where documents (samples) start in [start, start + count), ascending (data.document_mask).
  virtual std::vector<std::uint64_t> document_starts(std::uint64_t start, std::uint64_t count) const;
};

class MemoryTokens : public TokenSource {
 public:
  explicit MemoryTokens(std::vector<std::int32_t> tokens) : tokens_(std::move(tokens)) {}
  // With a loss mask (one value per token) and optionally packed into windows of `window` tokens.
  MemoryTokens(std::vector<std::int32_t> tokens, std::vector<std::uint8_t> loss_mask, std::uint64_t window = 0)
      : tokens_(std::move(tokens)), loss_mask_(std::move(loss_mask)), window_(window) {}
  std::uint64_t n_tokens() const override { return tokens_.size(); }
  void read(std::uint64_t start, std::uint64_t count, std::int32_t* out) const override;
  std::string describe() const override { return "tokens in memory"; }
  bool has_loss_mask() const override { return !loss_mask_.empty(); }
  void read_loss_mask(std::uint64_t start, std::uint64_t count, std::uint8_t* out) const override;
  std::uint64_t packed_window() const override { return window_; }
  // Tests: documents starting at these positions (ascending).
  void set_document_starts(std::vector<std::uint64_t> starts) { doc_starts_ = std::move(starts); }
  std::vector<std::uint64_t> document_starts(std::uint64_t start, std::uint64_t count) const override;

 private:
  std::vector<std::int32_t> tokens_;
  std::vector<std::uint8_t> loss_mask_;
  std::uint64_t window_ = 0;
  std::vector<std::uint64_t> doc_starts_;
};

}  // namespace zt::data
