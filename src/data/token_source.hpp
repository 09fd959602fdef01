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
};

class MemoryTokens : public TokenSource {
 public:
  explicit MemoryTokens(std::vector<std::int32_t> tokens) : tokens_(std::move(tokens)) {}
  std::uint64_t n_tokens() const override { return tokens_.size(); }
  void read(std::uint64_t start, std::uint64_t count, std::int32_t* out) const override;
  std::string describe() const override { return "tokens in memory"; }

 private:
  std::vector<std::int32_t> tokens_;
};

}  // namespace zt::data
