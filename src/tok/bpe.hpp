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
  // The heap path holds 4 bytes of ids plus at most 9 bytes of heap per byte of the piece; scratch
  // grown past this many bytes for one huge piece is given back after it, not kept by the thread.
  static constexpr std::size_t kKeepScratchBytes = std::size_t{16} << 20;

  explicit BpeMerger(const Vocab& vocab) : vocab_(&vocab) {}

  // Appends the tokens of `piece` (non-empty) to out. Scratch memory is reused between calls.
  void merge(std::string_view piece, std::vector<std::uint32_t>& out);
  // The two strategies, public for the test that compares them.
  void merge_scan(std::string_view piece, std::vector<std::uint32_t>& out);
  void merge_heap(std::string_view piece, std::vector<std::uint32_t>& out);

 private:
  // (rank, left) in one word, so the heap orders by rank, then leftmost: tiktoken's tie rule.
  using HeapEntry = std::uint64_t;
  std::uint32_t part_end(std::uint32_t left) const;
  std::uint32_t part_before(std::uint32_t left) const;
  std::uint32_t live_rank(std::uint32_t left) const;
  void push_pair(std::uint32_t left);
  void drop_stale_entries();
  void release_large_scratch();

  const Vocab* vocab_;
  std::vector<std::uint32_t> ids_, ranks_;  // scan: one entry per part; heap: ids_ per byte, kNone inside a part
  std::vector<HeapEntry> heap_;             // min-heap; entries whose pair has gone are skipped
};

}  // namespace zt::tok
