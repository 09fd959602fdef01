// The network's ends shared by GPT-2 and Llama (lm_head.hpp).
#include "model/lm_head.hpp"

#include <algorithm>

#include "backend/host_convert.hpp"
#include "core/error.hpp"

namespace zt::model {

void check_token_ids(const char* what, const std::int32_t* ids, std::int64_t n, std::int64_t vocab_size) {
  ZT_CHECK(ids != nullptr, "model: ", what, " ids must not be null");
  for (std::int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw DataError(cat("model: ", what, " id ", ids[i], " at position ", i, " of the micro-batch is outside [0, ",
                          vocab_size, "); check that the data was tokenized for this vocabulary"));
}

void check_target_ids(const std::int32_t* ids, std::int64_t n, std::int64_t vocab_size) {
  ZT_CHECK(ids != nullptr, "model: target ids must not be null");
  for (std::int64_t i = 0; i < n; ++i)
    if ((ids[i] < 0 || ids[i] >= vocab_size) && ids[i] != backend::kIgnoreTarget)
      throw DataError(cat("model: target id ", ids[i], " at position ", i, " of the micro-batch is outside [0, ",
                          vocab_size, ") and is not ", backend::kIgnoreTarget,
                          " (ignored); check that the data was tokenized for this vocabulary"));
}

double sum_token_losses(backend::Backend& be, const backend::Tensor& losses, const backend::Tensor& logits,
                        const backend::Tensor& targets_dev, const std::int32_t* targets, std::int64_t vocab_size) {
  be.copy_from_host(targets_dev.data, targets, targets_dev.bytes());
  be.cross_entropy_forward(losses, logits, targets_dev, vocab_size);
  std::vector<float> host(losses.numel());
  be.copy_to_host(host.data(), losses.data, losses.bytes());
  double sum = 0.0;
  for (float x : host) sum += x;
  return sum;
}

void SegmentStarts::set(backend::Backend& be, const std::int32_t* starts, int B, std::int64_t T) {
  on_ = starts != nullptr;
  if (!on_) return;
  const std::size_t bytes = static_cast<std::size_t>(B) * static_cast<std::size_t>(T) * sizeof(std::int32_t);
  if (buffer_.bytes() != bytes) {
    buffer_ = be.allocate(bytes);
    view_ = buffer_.view(DType::kI32, {B, T});
  }
  be.copy_from_host(buffer_.data(), starts, bytes);
}

std::vector<float> unpadded_logits(backend::Backend& be, const backend::Tensor& logits, std::int64_t vocab_size) {
  const std::size_t Vp = static_cast<std::size_t>(logits.dim(-1)), V = static_cast<std::size_t>(vocab_size);
  const std::size_t rows = static_cast<std::size_t>(logits.numel()) / Vp;
  std::vector<float> padded(rows * Vp), out(rows * V);
  backend::copy_to_host_as_f32(be, padded.data(), logits);
  for (std::size_t r = 0; r < rows; ++r) std::copy_n(padded.begin() + r * Vp, V, out.begin() + r * V);
  return out;
}

}  // namespace zt::model
