// Byte-pair merging of one pre-token piece: start from single bytes, then repeatedly merge the adjacent
// pair of lowest rank (Vocab::merged: tiktoken's rule, the id of the concatenation in `gpt2`; or HF
// tokenizers' rule, the pair's index in a merge list), the leftmost such pair on ties, until no
// adjacent pair merges.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tok/vocab.hpp"

namespace zt::tok {

class BpeMerger {
 public:
  // Pieces up to this many bytes use tiktoken's O(n^2) array scan; longer ones a heap (O(n log n)),
  // so a pathological multi-megabyte "word" cannot stall a worker. Both give the same tokens.
  static constexpr std::size_t kHeapFromBytes = 192;
  // Pieces from this many bytes (longer than a chunk of text: one huge "word") take the lean path: the
  // heap's 13 bytes per byte become 4.4 (ranks, a bitmap of part starts, a tree of block minima).
  static constexpr std::size_t kLeanFromBytes = std::size_t{1} << 20;
  // The heap path holds 4 bytes of ids plus at most 9 bytes of heap per byte of the piece; scratch
  // grown past this many bytes for one huge piece is given back after it, not kept by the thread.
  static constexpr std::size_t kKeepScratchBytes = std::size_t{16} << 20;

  explicit BpeMerger(const Vocab& vocab) : vocab_(&vocab) {}

  // Appends the tokens of `piece` (non-empty) to out. Scratch memory is reused between calls.
  void merge(std::string_view piece, std::vector<std::uint32_t>& out);
  // The three strategies, public for the tests that compare them.
  void merge_scan(std::string_view piece, std::vector<std::uint32_t>& out);
  void merge_heap(std::string_view piece, std::vector<std::uint32_t>& out);
  void merge_lean(std::string_view piece, std::vector<std::uint32_t>& out);

 private:
  // (rank, left) in one word, so the heap orders by rank, then leftmost: tiktoken's tie rule.
  using HeapEntry = std::uint64_t;
  std::uint32_t part_end(std::uint32_t left) const;
  std::uint32_t part_before(std::uint32_t left) const;
  std::uint32_t live_rank(std::uint32_t left) const;
  void push_pair(std::uint32_t left);
  void drop_stale_entries();
  void release_large_scratch();
  // The lean path (bpe_lean.cpp): parts are runs of the piece's bytes between set bits of starts_.
  std::uint32_t next_start(std::uint32_t i) const;
  std::uint32_t prev_start(std::uint32_t i) const;
  std::uint32_t part_id(std::string_view piece, std::uint32_t begin, std::uint32_t end) const;
  std::uint32_t lean_rank(std::string_view piece, std::uint32_t left) const;
  void refresh_block(std::uint32_t block);

  const Vocab* vocab_;
  std::vector<std::uint32_t> ids_, ranks_;  // scan: one entry per part; heap: ids_ per byte, kNone inside a part;
                                            // lean: ranks_ per byte, the pair's rank at each part's start
  std::vector<HeapEntry> heap_;             // min-heap; entries whose pair has gone are skipped
  std::vector<std::uint64_t> starts_;       // lean: bit i set = a part starts at byte i; word b = block b
  std::vector<HeapEntry> tree_;             // lean: segment tree of the blocks' (rank, left) minima, root at 1
  std::size_t leaves_ = 0;                  // lean: tree_ leaf count (a power of two >= the blocks)
  std::uint32_t n_ = 0;                     // lean: the piece's length
};

}  // namespace zt::tok
