// The lean merge of one huge pre-token (bpe.hpp): the rule of merge_heap -- the pair of least (rank,
// left) merges next -- in about 4.4 bytes of memory per byte of the piece instead of 13:
//   ranks_[i]  the rank of the pair that starts at part i (read only where a part starts);
//   starts_    one bit per byte, set where a part starts; a part's bytes are the piece's, so its token
//              is looked up by them (Vocab::find: the tokens' bytes are unique) and no id is stored;
//   tree_      per block of 64 bytes (one word of starts_) the least (rank, left) of its parts, under a
//              segment tree whose root is the next merge.
// A merge clears one start and changes two ranks (the merged part's pair and the pair before it): at
// most three blocks are rescanned (one word's set bits) and their paths to the root updated.
#include <algorithm>
#include <bit>

#include "core/error.hpp"
#include "tok/bpe.hpp"

namespace zt::tok {
namespace {

constexpr std::uint32_t kNoMerge = Vocab::kNone;  // also the largest rank: "no merge"
constexpr std::uint64_t kNoPair = ~std::uint64_t{0};  // a block (or subtree) without a mergeable pair
constexpr std::uint64_t kAll = ~std::uint64_t{0};

// Scratch grown for one huge piece goes back to the allocator before the output grows.
template <typename T>
void give_back(std::vector<T>& v) {
  if (v.capacity() * sizeof(T) <= BpeMerger::kKeepScratchBytes) return;
  v.clear();
  v.shrink_to_fit();
}

}  // namespace

std::uint32_t BpeMerger::next_start(std::uint32_t i) const {
  const std::uint64_t j = std::uint64_t{i} + 1;
  if (j >= n_) return n_;
  std::size_t w = j >> 6;
  std::uint64_t bits = starts_[w] & (kAll << (j & 63));
  while (bits == 0) {
    if (++w == starts_.size()) return n_;
    bits = starts_[w];
  }
  return static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
}

std::uint32_t BpeMerger::prev_start(std::uint32_t i) const {  // i > 0; byte 0 always starts a part
  std::size_t w = (i - 1) >> 6;
  std::uint64_t bits = starts_[w] & (kAll >> (63 - ((i - 1) & 63)));
  while (bits == 0) bits = starts_[--w];
  return static_cast<std::uint32_t>(w * 64 + 63 - static_cast<std::size_t>(std::countl_zero(bits)));
}

std::uint32_t BpeMerger::part_id(std::string_view piece, std::uint32_t begin, std::uint32_t end) const {
  return end - begin == 1 ? vocab_->byte_token(static_cast<unsigned char>(piece[begin]))
                          : vocab_->find(piece.substr(begin, end - begin));
}

std::uint32_t BpeMerger::lean_rank(std::string_view piece, std::uint32_t left) const {
  const std::uint32_t mid = next_start(left);
  if (mid == n_) return kNoMerge;
  return vocab_->merged(part_id(piece, left, mid), part_id(piece, mid, next_start(mid)));
}

void BpeMerger::refresh_block(std::uint32_t block) {
  std::uint64_t best = kNoPair;
  for (std::uint64_t bits = starts_[block]; bits != 0; bits &= bits - 1) {
    const std::uint32_t i = block * 64 + static_cast<std::uint32_t>(std::countr_zero(bits));
    if (ranks_[i] != kNoMerge) best = std::min(best, (std::uint64_t{ranks_[i]} << 32) | i);
  }
  std::size_t node = leaves_ + block;
  tree_[node] = best;
  for (node /= 2; node >= 1; node /= 2) {
    const std::uint64_t least = std::min(tree_[2 * node], tree_[2 * node + 1]);
    if (tree_[node] == least) break;  // the paths above are unchanged
    tree_[node] = least;
  }
}

void BpeMerger::merge_lean(std::string_view piece, std::vector<std::uint32_t>& out) {
  if (piece.size() >= kNoMerge)
    throw Error(cat("a single pre-token of ", piece.size(), " bytes (4 GiB or more) cannot be merged; "
                    "break the input with white space or newlines"));
  n_ = static_cast<std::uint32_t>(piece.size());
  const std::uint32_t blocks = (n_ + 63) / 64;
  starts_.assign(blocks, kAll);
  if (n_ % 64 != 0) starts_.back() = (std::uint64_t{1} << (n_ % 64)) - 1;
  ranks_.resize(n_);
  for (std::uint32_t i = 0; i + 1 < n_; ++i)
    ranks_[i] = vocab_->merged(vocab_->byte_token(static_cast<unsigned char>(piece[i])),
                               vocab_->byte_token(static_cast<unsigned char>(piece[i + 1])));
  ranks_[n_ - 1] = kNoMerge;
  leaves_ = std::bit_ceil(std::size_t{blocks});
  tree_.assign(2 * leaves_, kNoPair);
  for (std::uint32_t b = 0; b < blocks; ++b)
    for (std::uint32_t i = b * 64; i < std::min(n_, b * 64 + 64); ++i)
      if (ranks_[i] != kNoMerge) tree_[leaves_ + b] = std::min(tree_[leaves_ + b], (std::uint64_t{ranks_[i]} << 32) | i);
  for (std::size_t node = leaves_ - 1; node >= 1; --node) tree_[node] = std::min(tree_[2 * node], tree_[2 * node + 1]);

  while (tree_[1] != kNoPair) {
    const auto left = static_cast<std::uint32_t>(tree_[1]);
    const std::uint32_t right = next_start(left);
    starts_[right >> 6] &= ~(std::uint64_t{1} << (right & 63));
    ranks_[left] = lean_rank(piece, left);
    const std::uint32_t before = left > 0 ? prev_start(left) : kNoMerge;
    if (before != kNoMerge) ranks_[before] = lean_rank(piece, before);
    refresh_block(left >> 6);
    if (right >> 6 != left >> 6) refresh_block(right >> 6);
    if (before != kNoMerge && before >> 6 != left >> 6) refresh_block(before >> 6);
  }
  give_back(ranks_);
  give_back(tree_);
  std::size_t parts = 0;
  for (const std::uint64_t w : starts_) parts += static_cast<std::size_t>(std::popcount(w));
  if (out.capacity() < out.size() + parts) out.reserve(out.size() + parts + parts / 16);  // room for what follows
  for (std::uint32_t i = 0; i < n_;) {
    const std::uint32_t end = next_start(i);
    out.push_back(part_id(piece, i, end));
    i = end;
  }
  give_back(starts_);
}

}  // namespace zt::tok
