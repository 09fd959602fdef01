// The order contract (docs/INTERFACE.md): which training window comes next. Window g (counted from the
// start of training, across epochs and resumes) is a function of (seed, number of tokens, seq_len)
// only, so 1, 2 or 4 ranks see the same global batches and a checkpoint resumes on another world size
// with the same next batch. The cursor is one number: windows consumed.
#pragma once

#include <cstdint>

namespace zt::data {

class WindowOrder {
 public:
  // Windows hold seq_len + 1 tokens and start seq_len apart; an epoch has floor((n-1)/seq_len) of
  // them (the stream wraps when fewer than seq_len + 1 tokens remain). Packed data (`packed`, ztok
  // --pack) is windows of seq_len + 1 laid end to end: they start seq_len + 1 apart and an epoch has
  // floor(n/(seq_len+1)). Throws DataError when the stream is shorter than one window.
  WindowOrder(std::uint64_t n_tokens, std::int64_t seq_len, bool shuffle, std::uint64_t seed, bool packed = false);
  // The windows per epoch of such a stream (0 when it is shorter than one window), without the throw.
  static std::uint64_t windows_in(std::uint64_t n_tokens, std::int64_t seq_len, bool packed = false);

  std::uint64_t windows_per_epoch() const { return windows_per_epoch_; }
  std::int64_t seq_len() const { return seq_len_; }
  // First token of global window g; epoch = g / windows_per_epoch.
  std::uint64_t window_start(std::uint64_t g) const;

 private:
  std::uint64_t windows_per_epoch_;
  std::int64_t seq_len_;
  std::uint64_t stride_;  // tokens between window starts
  bool shuffle_;
  std::uint64_t seed_;
};

// A seeded bijection of [0, n): a balanced Feistel network over the next even power of two with
// cycle-walking, so a shuffled epoch needs no permutation array (O(1) memory for any corpus) and any
// position is computed directly (exact resume from a cursor).
std::uint64_t permute(std::uint64_t index, std::uint64_t n, std::uint64_t key);

// Which global windows a rank's micro-batch takes (docs/INTERFACE.md): rank r takes the r-th contiguous
// slice of the step's global batch, and within a rank, micro-batches in order.
struct BatchSlice {
  std::int64_t global_batch, micro_batch, dp_size, dp_rank;
  // Global index of sequence j (0 <= j < micro_batch) of micro-batch m at optimizer step (0-based).
  std::uint64_t window(std::uint64_t step, std::int64_t micro, std::int64_t j) const {
    const std::int64_t per_rank = global_batch / dp_size;
    return step * static_cast<std::uint64_t>(global_batch) +
           static_cast<std::uint64_t>(dp_rank * per_rank + micro * micro_batch + j);
  }
};

}  // namespace zt::data
