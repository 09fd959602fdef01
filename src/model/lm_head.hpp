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

// logits [rows, Vp] as fp32 on the host with the padded columns dropped: [rows, vocab_size].
std::vector<float> unpadded_logits(backend::Backend& be, const backend::Tensor& logits, std::int64_t vocab_size);

}  // namespace zt::model
