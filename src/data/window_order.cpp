// Window order and the Feistel permutation behind data.shuffle=true.
#include "data/window_order.hpp"

#include "core/error.hpp"

namespace zt::data {
namespace {
// splitmix64 finaliser: a well-mixed 64-bit hash (Steele et al., "Fast splittable PRNGs").
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
constexpr int kFeistelRounds = 6;
}  // namespace

std::uint64_t permute(std::uint64_t index, std::uint64_t n, std::uint64_t key) {
  ZT_CHECK_LT(index, n);
  int half_bits = 1;
  while ((1ULL << (2 * half_bits)) < n) ++half_bits;  // domain 2^(2*half_bits) >= n, < 4n
  const std::uint64_t mask = (1ULL << half_bits) - 1;
  std::uint64_t x = index;
  do {  // cycle-walk: re-encrypt until the value falls inside [0, n); expected < 4 passes
    std::uint64_t left = x >> half_bits, right = x & mask;
    for (int round = 0; round < kFeistelRounds; ++round) {
      const std::uint64_t f = mix(key ^ mix(right + (static_cast<std::uint64_t>(round) << 56))) & mask;
      const std::uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half_bits) | right;
  } while (x >= n);
  return x;
}

WindowOrder::WindowOrder(std::uint64_t n_tokens, std::int64_t seq_len, bool shuffle, std::uint64_t seed, bool packed)
    : windows_per_epoch_(0), seq_len_(seq_len), stride_(static_cast<std::uint64_t>(seq_len) + (packed ? 1 : 0)),
      shuffle_(shuffle), seed_(seed) {
  ZT_CHECK_GE(seq_len, 1);
  if (n_tokens < static_cast<std::uint64_t>(seq_len) + 1)
    throw DataError(cat("the data holds ", n_tokens, " tokens, fewer than one window of model.seq_len+1 = ",
                        seq_len + 1, ": give more data or a shorter model.seq_len"));
  windows_per_epoch_ = windows_in(n_tokens, seq_len, packed);
}

std::uint64_t WindowOrder::windows_in(std::uint64_t n_tokens, std::int64_t seq_len, bool packed) {
  const auto stride = static_cast<std::uint64_t>(seq_len) + (packed ? 1 : 0);
  if (seq_len < 1 || n_tokens < static_cast<std::uint64_t>(seq_len) + 1) return 0;
  return packed ? n_tokens / stride : (n_tokens - 1) / stride;
}

std::uint64_t WindowOrder::window_start(std::uint64_t g) const {
  const std::uint64_t epoch = g / windows_per_epoch_, k = g % windows_per_epoch_;
  const std::uint64_t slot = shuffle_ ? permute(k, windows_per_epoch_, mix(seed_ ^ mix(epoch))) : k;
  return slot * stride_;
}

}  // namespace zt::data
