// Two implementations of one merge rule (see bpe.hpp); tests/unit/tok checks they agree.
#include "tok/bpe.hpp"

#include <algorithm>
#include <functional>

namespace zt::tok {
namespace {
constexpr std::uint32_t kNone = Vocab::kNone;  // also the largest rank: "no merge"
}

void BpeMerger::merge(std::string_view piece, std::vector<std::uint32_t>& out) {
  if (piece.size() == 1) {
    out.push_back(vocab_->byte_token(static_cast<unsigned char>(piece[0])));
  } else if (piece.size() < kHeapFromBytes) {
    merge_scan(piece, out);
  } else {
    merge_heap(piece, out);
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
    ids_[best] = ranks_[best];
    std::copy(ids_.begin() + best + 2, ids_.begin() + m, ids_.begin() + best + 1);
    std::copy(ranks_.begin() + best + 2, ranks_.begin() + m, ranks_.begin() + best + 1);
    --m;
    ranks_[best] = best + 1 < m ? vocab_->merged(ids_[best], ids_[best + 1]) : kNone;
    if (best > 0) ranks_[best - 1] = vocab_->merged(ids_[best - 1], ids_[best]);
  }
  out.insert(out.end(), ids_.begin(), ids_.begin() + m);
}

// Parts are identified by the byte index where they start; ids_[start] is the part's token,
// next_/prev_ link live parts. A heap entry is live when its pair still exists with that rank.
void BpeMerger::push_pair(std::uint32_t left) {
  const std::uint32_t right = next_[left];
  if (right == kNone) return;
  const std::uint32_t rank = vocab_->merged(ids_[left], ids_[right]);
  if (rank == kNone) return;
  heap_.push_back({rank, left, right});
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
}

void BpeMerger::merge_heap(std::string_view piece, std::vector<std::uint32_t>& out) {
  const auto n = static_cast<std::uint32_t>(piece.size());
  ids_.resize(n);
  next_.resize(n);
  prev_.resize(n);
  heap_.clear();
  for (std::uint32_t i = 0; i < n; ++i) {
    ids_[i] = vocab_->byte_token(static_cast<unsigned char>(piece[i]));
    next_[i] = i + 1 < n ? i + 1 : kNone;
    prev_[i] = i > 0 ? i - 1 : kNone;
  }
  for (std::uint32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
    const HeapEntry e = heap_.back();
    heap_.pop_back();
    if (next_[e.left] != e.right || ids_[e.left] == kNone ||
        vocab_->merged(ids_[e.left], ids_[e.right]) != e.rank) {
      continue;  // stale: one side has merged since this entry was pushed
    }
    ids_[e.left] = e.rank;
    ids_[e.right] = kNone;  // dead
    next_[e.left] = next_[e.right];
    if (next_[e.left] != kNone) prev_[next_[e.left]] = e.left;
    push_pair(e.left);
    if (prev_[e.left] != kNone) push_pair(prev_[e.left]);
  }
  for (std::uint32_t i = 0; i != kNone; i = next_[i]) out.push_back(ids_[i]);
}

}  // namespace zt::tok
