// Greedy in-order packing of instruction samples into fixed windows (sample_packing.hpp).
#include "ztok/sample_packing.hpp"

#include "core/error.hpp"

namespace zt::ztok {

SampleLayout::SampleLayout(std::uint64_t window, std::uint32_t pad_id) : window_(window), pad_id_(pad_id) {
  ZT_CHECK(window != 1, "a packing window holds at least 2 tokens");
}

void SampleLayout::append(const TokenizedSample& s, std::size_t begin, std::size_t end) {
  starts_.push_back(tokens_.size());
  tokens_.insert(tokens_.end(), s.ids.begin() + static_cast<std::ptrdiff_t>(begin),
                 s.ids.begin() + static_cast<std::ptrdiff_t>(end));
  mask_.insert(mask_.end(), s.loss_mask.begin() + static_cast<std::ptrdiff_t>(begin),
               s.loss_mask.begin() + static_cast<std::ptrdiff_t>(end));
}

void SampleLayout::pad_open_window() {
  if (window_ == 0 || tokens_.size() % window_ == 0) return;
  const std::uint64_t n = room();
  tokens_.insert(tokens_.end(), n, pad_id_);
  mask_.insert(mask_.end(), n, 0);
  padding_ += n;
}

void SampleLayout::add(const TokenizedSample& s) {
  ZT_CHECK_EQ(s.ids.size(), s.loss_mask.size(), "a sample's loss mask must have one value per id");
  if (s.ids.empty()) return;
  ++samples_;
  for (const std::uint8_t m : s.loss_mask) trained_ += m;
  const std::uint64_t n = s.ids.size();
  if (window_ == 0) return append(s, 0, n);
  if (n > room()) pad_open_window();
  if (n <= window_) return append(s, 0, n);
  // Longer than a window: whole windows, each continuation opening with the token the previous window
  // ended on. A window's first token is an input only (nothing predicts it), so without that repeat the
  // token at each cut would never be trained; repeated, it is a target at the end of one window and the
  // input at the start of the next (Megatron's windows overlap by one token for the same reason). The
  // repeat's mask is 0: the shards' mask counts each trained token once.
  ++cut_;
  for (std::uint64_t begin = 0;; begin += window_ - 1) {
    append(s, begin, std::min(n, begin + window_));
    if (begin > 0) mask_[starts_.back()] = 0;
    if (begin + window_ >= n) return;
  }
}

void SampleLayout::finish() { pad_open_window(); }

}  // namespace zt::ztok
