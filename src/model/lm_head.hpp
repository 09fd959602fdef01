// What both model families do at the ends of the network, written once: checking token ids on the way
// in, and on the way out summing the token losses or handing back the logits without padded columns.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.hpp"

namespace zt::model {

// Throws DataError naming the first id outside [0, vocab_size) and its position ("token" or "target").
void check_token_ids(const char* what, const std::int32_t* ids, std::int64_t n, std::int64_t vocab_size);
// The same for targets, which may also be backend::kIgnoreTarget (outside the loss mask).
void check_target_ids(const std::int32_t* ids, std::int64_t n, std::int64_t vocab_size);

// Copies `targets` (host, one per row of `logits`) to `targets_dev`, computes the per-token losses (fp32)
// over the first vocab_size columns of logits [rows, Vp] (dlogits kept in place for backward, as the
// backend's cross_entropy_forward does), and returns their sum, added on the host in row order.
double sum_token_losses(backend::Backend& be, const backend::Tensor& losses, const backend::Tensor& logits,
                        const backend::Tensor& targets_dev, const std::int32_t* targets, std::int64_t vocab_size);

// The document mask's segment starts on the backend (data.document_mask), for the attention ops:
// [B,T] i32, allocated on first use, so a run without the mask holds nothing more.
class SegmentStarts {
 public:
  // starts: host [B*T], each position's first attended key; nullptr: every position attends [0, t].
  void set(backend::Backend& be, const std::int32_t* starts, int B, std::int64_t T);
  backend::Tensor tensor() const { return on_ ? view_ : backend::Tensor(); }  // empty when off
  std::size_t bytes() const { return buffer_.bytes(); }

 private:
  backend::Buffer buffer_;
  backend::Tensor view_;
  bool on_ = false;
};

// logits [rows, Vp] as fp32 on the host with the padded columns dropped: [rows, vocab_size].
std::vector<float> unpadded_logits(backend::Backend& be, const backend::Tensor& logits, std::int64_t vocab_size);

}  // namespace zt::model
