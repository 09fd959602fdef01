// Open-addressing hash maps for the tokenizer's hot path: no node allocation, linear probing,
// power-of-two capacity. PairMap: (token, token) -> merged token. BytesMap: byte string -> value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace zt::tok {

// Fast 64-bit hash of a short byte string (a multiply-xorshift over 8-byte words); not for security.
inline std::uint64_t hash_bytes(const char* p, std::size_t n) {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = n * kMul;
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  if (n > 0) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * kMul;
  }
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  return h ^ (h >> 32);
}

inline std::size_t capacity_for(std::size_t n_entries) {
  std::size_t cap = 16;
  while (cap < 2 * n_entries) cap *= 2;
  return cap;
}

// Maps an ordered pair of 32-bit ids to a 32-bit value; kMissing marks "absent".
class PairMap {
 public:
  static constexpr std::uint32_t kMissing = 0xFFFFFFFFu;

  explicit PairMap(std::size_t n_entries = 0)
      : keys_(capacity_for(n_entries)), values_(keys_.size(), kMissing), mask_(keys_.size() - 1) {}

  void insert(std::uint32_t a, std::uint32_t b, std::uint32_t value) {
    const std::uint64_t key = (std::uint64_t{a} << 32) | b;
    std::size_t i = slot(key);
    while (values_[i] != kMissing && keys_[i] != key) i = (i + 1) & mask_;
    keys_[i] = key;
    values_[i] = value;
  }
  std::uint32_t find(std::uint32_t a, std::uint32_t b) const {
    const std::uint64_t key = (std::uint64_t{a} << 32) | b;
    for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
      if (values_[i] == kMissing || keys_[i] == key) return values_[i];
    }
  }

 private:
  std::size_t slot(std::uint64_t key) const {
    key *= 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(key >> 32) & mask_;
  }
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint32_t> values_;
  std::size_t mask_;
};

// Maps byte strings (copied into an internal arena) to 32-bit values. Fixed capacity chosen at
// construction; size() tells callers when to clear() a bounded cache.
class BytesMap {
 public:
  static constexpr std::uint32_t kMissing = 0xFFFFFFFFu;

  explicit BytesMap(std::size_t n_entries = 0) : slots_(capacity_for(n_entries)), mask_(slots_.size() - 1) {}

  // Inserts key -> value unless key is present; returns false when it was present.
  bool insert(std::string_view key, std::uint32_t value) {
    const std::uint64_t h = hash_bytes(key.data(), key.size());
    std::size_t i = h & mask_;
    for (; slots_[i].value != kMissing; i = (i + 1) & mask_)
      if (matches(slots_[i], h, key)) return false;
    slots_[i] = Slot{h, static_cast<std::uint32_t>(arena_.size()), static_cast<std::uint32_t>(key.size()), value};
    arena_.append(key);
    ++size_;
    return true;
  }
  std::uint32_t find(std::string_view key) const {
    const std::uint64_t h = hash_bytes(key.data(), key.size());
    for (std::size_t i = h & mask_; slots_[i].value != kMissing; i = (i + 1) & mask_)
      if (matches(slots_[i], h, key)) return slots_[i].value;
    return kMissing;
  }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return slots_.size(); }
  std::size_t arena_bytes() const { return arena_.size(); }
  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    arena_.clear();
    size_ = 0;
  }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t offset = 0;
    std::uint32_t length = 0;
    std::uint32_t value = kMissing;
  };
  bool matches(const Slot& s, std::uint64_t h, std::string_view key) const {
    return s.hash == h && s.length == key.size() &&
           std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0;
  }
  std::vector<Slot> slots_;
  std::string arena_;
  std::size_t mask_;
  std::size_t size_ = 0;
};

}  // namespace zt::tok
