// Weighted blending of several corpora (Megatron-LM's `--data-path 0.7 web 0.3 code`): data.train =
// "0.7:web/train_*.h5,0.3:code/train_*.h5". Global window g of the blend goes to the corpus whose
// realised share lags its weight the most (Megatron's BlendedDataset greedy), and within that corpus to
// its next window in its own WindowOrder (its own seeded shuffle and epochs: a small upweighted corpus
// repeats). The mapping is a function of the weights and the corpora's window orders only, so every
// rank, world size and resume sees the same stream; one corpus of weight 1 is today's order exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/window_order.hpp"

namespace zt::data {

// One corpus of a blend: its glob (one per weighted corpus; an unweighted value keeps its comma-separated
// globs together as one corpus) and its weight, normalised over the blend.
struct CorpusSpec {
  std::string glob;
  double weight = 1;
};

// "W:GLOB,W:GLOB,..." (every entry weighted, W > 0) is a blend; a value without weights is one corpus
// of weight 1 (its comma-separated globs concatenated, as before). A malformed entry, a weight <= 0 or
// a mix of weighted and unweighted entries is an InputError naming `key`, the entry and the fix.
std::vector<CorpusSpec> parse_blend(const std::string& value, const std::string& key);

// "0.7:web/*.h5,0.3:code/*.h5" (normalised weights); one corpus: its glob alone.
std::string describe_blend(const std::vector<CorpusSpec>& corpora);

// The weights as the greedy uses them: integers (2^30 in all, each >= 1), so the order is exact and
// the same on every machine and compiler. Two blends with equal quantized weights give the same order.
std::vector<std::int64_t> quantize_weights(const std::vector<double>& weights);

// Blend position i -> (corpus, that corpus's window index). Sample i goes to argmax_d W_d (i + 1) -
// S count_d(i) (S = sum W, ties to the lowest d), counted exactly in integers. Random access replays
// the greedy from the nearest snapshot (one every kSnapshotEvery positions, kept as it goes), so a
// resume at position 10^8 replays once and reads in order after that. Not thread-safe: one per reader.
class BlendIndex {
 public:
  explicit BlendIndex(const std::vector<double>& weights);
  struct Position {
    std::size_t corpus = 0;
    std::uint64_t index = 0;  // this corpus's window counted over the blend's positions before it
  };
  Position locate(std::uint64_t i) const;
  // Windows of each corpus among positions [0, i).
  std::vector<std::uint64_t> counts_before(std::uint64_t i) const;
  std::size_t corpora() const { return weights_.size(); }
  static constexpr std::uint64_t kSnapshotEvery = 1u << 16;

 private:
  struct State {
    std::uint64_t position = 0;
    std::vector<std::uint64_t> counts;
    std::vector<std::int64_t> lag;  // W_d (position + 1) - S count_d: bounded, so no overflow
  };
  void seek(std::uint64_t i) const;  // current_ = the state at position i
  std::size_t pick() const;          // the corpus of current_.position

  std::vector<std::int64_t> weights_;
  std::int64_t total_ = 0;
  mutable State current_;
  mutable std::vector<State> snapshots_;  // at positions 0, kSnapshotEvery, 2 kSnapshotEvery, ...
};

// The blend's window order: global window g (>= start, the window at which this blend began; 0 unless
// a resume started a new mix with data.reset_order) is blend position g - start.
class BlendedOrder {
 public:
  explicit BlendedOrder(WindowOrder single);  // one corpus: window_start(g) of it, unchanged
  BlendedOrder(std::vector<WindowOrder> orders, const std::vector<double>& weights, std::uint64_t start = 0);

  struct Window {
    std::size_t corpus = 0;
    std::uint64_t start = 0;  // first token in that corpus's stream
  };
  Window window(std::uint64_t g) const;
  // Windows taken from each corpus among global windows [start, g).
  std::vector<std::uint64_t> consumed(std::uint64_t g) const;
  std::int64_t seq_len() const { return orders_.front().seq_len(); }
  std::size_t corpora() const { return orders_.size(); }
  const WindowOrder& order(std::size_t c) const { return orders_[c]; }

 private:
  std::vector<WindowOrder> orders_;
  BlendIndex index_;
  std::uint64_t start_ = 0;
};

// The shuffle seed of corpus c of a blend: train.seed for the first (so one corpus keeps today's
// order), distinct streams for the others.
std::uint64_t corpus_seed(std::uint64_t seed, std::size_t c);

}  // namespace zt::data
