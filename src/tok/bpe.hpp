// Byte-pair merging of one pre-token piece, with tiktoken's rule: start from single bytes, then
// repeatedly merge the adjacent pair whose concatenation has the lowest rank (= token id in `gpt2`),
// the leftmost such pair on ties, until no adjacent pair forms a token.
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

  explicit BpeMerger(const Vocab& vocab) : vocab_(&vocab) {}

  // Appends the tokens of `piece` (non-empty) to out. Scratch memory is reused between calls.
  void merge(std::string_view piece, std::vector<std::uint32_t>& out);
  // The two strategies, public for the test that compares them.
  void merge_scan(std::string_view piece, std::vector<std::uint32_t>& out);
  void merge_heap(std::string_view piece, std::vector<std::uint32_t>& out);

 private:
  struct HeapEntry {
    std::uint32_t rank;   // merged token id
    std::uint32_t left;   // byte index where the left part starts
    std::uint32_t right;  // byte index where the right part starts
    bool operator>(const HeapEntry& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  void push_pair(std::uint32_t left);

  const Vocab* vocab_;
  std::vector<std::uint32_t> ids_, ranks_;      // scan: one entry per part
  std::vector<std::uint32_t> next_, prev_;      // heap: linked list over byte positions
  std::vector<HeapEntry> heap_;
};

}  // namespace zt::tok
