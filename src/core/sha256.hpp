// SHA-256 (FIPS 180-4), small and dependency-free: vocabulary hashes, shard and checkpoint checksums.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zt {

class Sha256 {
 public:
  using Digest = std::array<std::uint8_t, 32>;

  Sha256();
  void update(const void* data, std::size_t n_bytes);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  // Pads, returns the digest and resets the object for a new message.
  Digest finish();

 private:
  void compress(const std::uint8_t* block);  // one 64-byte block

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> block_;
  std::size_t block_bytes_ = 0;
  std::uint64_t total_bytes_ = 0;
};

// Lower-case hex of a digest (64 characters).
std::string to_hex(const Sha256::Digest& digest);
// Hex SHA-256 of one byte string.
std::string sha256_hex(std::string_view bytes);

}  // namespace zt
