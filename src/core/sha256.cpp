// SHA-256 after FIPS 180-4 §6.2: 64 rounds over 512-bit blocks, big-endian words.
#include "core/sha256.hpp"

#include <algorithm>
#include <cstring>

#include "core/sha256_hw.hpp"

namespace zt {
namespace {


constexpr std::array<std::uint32_t, 8> kInit = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

bool hardware() {
  static const bool available = detail::sha256_hw_available();
  return available;
}

}  // namespace

Sha256::Sha256() : state_(kInit), block_{} {}

void Sha256::compress(const std::uint8_t* block) {
  std::uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = (std::uint32_t{block[4 * i]} << 24) | (std::uint32_t{block[4 * i + 1]} << 16) |
           (std::uint32_t{block[4 * i + 2]} << 8) | std::uint32_t{block[4 * i + 3]};
  }
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  std::uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                             detail::kSha256Round[i] + w[i];
    const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g; g = f; f = e; e = d + t1;
    d = c; c = b; b = a; a = t1 + t2;
  }
  state_[0] += a; state_[1] += b; state_[2] += c; state_[3] += d;
  state_[4] += e; state_[5] += f; state_[6] += g; state_[7] += h;
}

void Sha256::update(const void* data, std::size_t n_bytes) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  total_bytes_ += n_bytes;
  if (block_bytes_ > 0) {
    const std::size_t take = std::min(n_bytes, block_.size() - block_bytes_);
    std::memcpy(block_.data() + block_bytes_, p, take);
    block_bytes_ += take; p += take; n_bytes -= take;
    if (block_bytes_ < block_.size()) return;
    if (hardware()) detail::sha256_hw_compress(state_.data(), block_.data(), 1);
    else compress(block_.data());
    block_bytes_ = 0;
  }
  if (hardware() && n_bytes >= 64) {
    detail::sha256_hw_compress(state_.data(), p, n_bytes / 64);
    p += n_bytes / 64 * 64;
    n_bytes %= 64;
  }
  for (; n_bytes >= 64; p += 64, n_bytes -= 64) compress(p);
  std::memcpy(block_.data(), p, n_bytes);
  block_bytes_ = n_bytes;
}

Sha256::Digest Sha256::finish() {
  const std::uint64_t bit_length = total_bytes_ * 8;
  const std::uint8_t pad_start = 0x80;
  update(&pad_start, 1);
  const std::uint8_t zero = 0;
  while (block_bytes_ != 56) update(&zero, 1);
  std::uint8_t length_be[8];
  for (int i = 0; i < 8; ++i) length_be[i] = static_cast<std::uint8_t>(bit_length >> (56 - 8 * i));
  update(length_be, 8);
  Digest digest;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) digest[4 * i + j] = static_cast<std::uint8_t>(state_[i] >> (24 - 8 * j));
  *this = Sha256();
  return digest;
}

std::string to_hex(const Sha256::Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(64);
  for (std::uint8_t byte : digest) {
    hex += kHex[byte >> 4];
    hex += kHex[byte & 15];
  }
  return hex;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 hasher;
  hasher.update(bytes);
  return to_hex(hasher.finish());
}

}  // namespace zt
