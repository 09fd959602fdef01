// Implementations of one merge rule (see bpe.hpp; the lean one for huge pieces is bpe_lean.cpp);
// tests/unit/tok checks they agree.
#include "tok/bpe.hpp"

#include <algorithm>
#include <functional>

#include "core/error.hpp"

namespace zt::tok {
namespace {
constexpr std::uint32_t kNone = Vocab::kNone;  // also the largest rank: "no merge"
}

void BpeMerger::merge(std::string_view piece, std::vector<std::uint32_t>& out) {
  if (piece.size() == 1) {
    out.push_back(vocab_->byte_token(static_cast<unsigned char>(piece[0])));
  } else if (piece.size() < kHeapFromBytes) {
    merge_scan(piece, out);
  } else if (piece.size() < kLeanFromBytes) {
    merge_heap(piece, out);
  } else {
    merge_lean(piece, out);
  }
}

// tiktoken's _byte_pair_merge: ranks_[i] is the rank of the pair (ids_[i], ids_[i + 1]).
void BpeMerger::merge_scan(std::string_view piece, std::vector<std::uint32_t>& out) {
  const std::size_t n = piece.size();
  ids_.resize(n);
  ranks_.resize(n);
  for (std::size_t i = 0; i < n; ++i) ids_[i] = vocab_->byte_token(static_cast<unsigned char>(piece[i]));
  for (std::size_t i = 0; i + 1 < n; ++i) ranks_[i] = vocab_->merged(ids_[i], ids_[i + 1]);
  ranks_[n - 1] = kNone;
  std::size_t m = n;  // live parts
  for (;;) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < m; ++i)
      if (ranks_[i] < ranks_[best]) best = i;
    if (m < 2 || ranks_[best] == kNone) break;
    ids_[best] = vocab_->merge_result(ranks_[best]);
    std::copy(ids_.begin() + best + 2, ids_.begin() + m, ids_.begin() + best + 1);
    std::copy(ranks_.begin() + best + 2, ranks_.begin() + m, ranks_.begin() + best + 1);
    --m;
    ranks_[best] = best + 1 < m ? vocab_->merged(ids_[best], ids_[best + 1]) : kNone;
    if (best > 0) ranks_[best - 1] = vocab_->merged(ids_[best - 1], ids_[best]);
  }
  out.insert(out.end(), ids_.begin(), ids_.begin() + m);
}

// Parts are identified by the byte index where they start: ids_[start] is the part's token and ids_
// is kNone at every other byte, so a part ends where its token's bytes end and the part before it is
// found by stepping back over kNone (at most the longest token's length). No links: 4 bytes per byte.
std::uint32_t BpeMerger::part_end(std::uint32_t left) const {
  return left + static_cast<std::uint32_t>(vocab_->token_bytes(ids_[left]).size());
}

std::uint32_t BpeMerger::part_before(std::uint32_t left) const {
  if (left == 0) return kNone;
  std::uint32_t i = left - 1;
  while (ids_[i] == kNone) --i;  // byte 0 always starts a part
  return i;
}

// Rank of the pair that starts at part `left` now: kNone when it is the last part or the two parts'
// bytes form no token.
std::uint32_t BpeMerger::live_rank(std::uint32_t left) const {
  const std::uint32_t right = part_end(left);
  return right < ids_.size() ? vocab_->merged(ids_[left], ids_[right]) : kNone;
}

// An entry is valid while the pair at its `left` has its rank. A pair that changes is pushed again,
// so every live pair has a valid entry and the valid minimum is tiktoken's next merge; the others are
// skipped when popped, or dropped here when the heap reaches its reserved size (n + n/8): then at most
// n - 1 valid entries remain, so dropping runs O(1) times per piece and the heap never reallocates.
void BpeMerger::drop_stale_entries() {
  std::vector<bool> seen(ids_.size());  // a pair pushed twice with the same rank is kept once
  std::erase_if(heap_, [&](HeapEntry e) {
    const auto left = static_cast<std::uint32_t>(e);
    if (ids_[left] == kNone || live_rank(left) != e >> 32 || seen[left]) return true;
    seen[left] = true;
    return false;
  });
  std::make_heap(heap_.begin(), heap_.end(), std::greater<>{});
}

void BpeMerger::push_pair(std::uint32_t left) {
  const std::uint32_t rank = live_rank(left);
  if (rank == kNone) return;
  if (heap_.size() == heap_.capacity()) drop_stale_entries();
  heap_.push_back((HeapEntry{rank} << 32) | left);
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
}

void BpeMerger::merge_heap(std::string_view piece, std::vector<std::uint32_t>& out) {
  if (piece.size() >= kNone)
    throw Error(cat("a single pre-token of ", piece.size(), " bytes (4 GiB or more) cannot be merged; "
                    "break the input with white space or newlines"));
  const auto n = static_cast<std::uint32_t>(piece.size());
  ids_.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) ids_[i] = vocab_->byte_token(static_cast<unsigned char>(piece[i]));
  heap_.clear();
  heap_.reserve(std::size_t{n} + n / 8);  // untouched until used: the heap peaks at 9 bytes per byte
  for (std::uint32_t i = 0; i + 1 < n; ++i) {
    const std::uint32_t rank = vocab_->merged(ids_[i], ids_[i + 1]);
    if (rank != kNone) heap_.push_back((HeapEntry{rank} << 32) | i);
  }
  std::make_heap(heap_.begin(), heap_.end(), std::greater<>{});
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
    const HeapEntry e = heap_.back();
    heap_.pop_back();
    const auto left = static_cast<std::uint32_t>(e), rank = static_cast<std::uint32_t>(e >> 32);
    if (ids_[left] == kNone || live_rank(left) != rank) continue;  // stale: the pair has changed
    ids_[part_end(left)] = kNone;
    ids_[left] = vocab_->merge_result(rank);
    push_pair(left);
    const std::uint32_t before = part_before(left);
    if (before != kNone) push_pair(before);
  }
  std::uint32_t parts = 0;  // the parts' ids, moved to the front (in place: parts <= byte index)
  for (std::uint32_t i = 0; i < n; i = part_end(i)) ids_[parts++] = ids_[i];
  if (heap_.capacity() * sizeof(HeapEntry) > kKeepScratchBytes) {  // empty now: free it before `out` grows
    heap_.clear();
    heap_.shrink_to_fit();
  }
  // A huge piece: room for what callers append next (<|endoftext|>, later pieces) without doubling
  // the vector; smaller ones keep the vector's geometric growth.
  if (parts >= (1u << 20) && out.capacity() < out.size() + parts) out.reserve(out.size() + parts + parts / 16);
  out.insert(out.end(), ids_.begin(), ids_.begin() + parts);
  release_large_scratch();
}

void BpeMerger::release_large_scratch() {
  if (ids_.capacity() * sizeof(std::uint32_t) + heap_.capacity() * sizeof(HeapEntry) <= kKeepScratchBytes) return;
  ids_.clear();  // clear + shrink_to_fit: `ids_ = {}` would keep the capacity (initializer-list assignment)
  ids_.shrink_to_fit();
  heap_.clear();
  heap_.shrink_to_fit();
}

}  // namespace zt::tok
