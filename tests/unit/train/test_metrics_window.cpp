// The metrics' FLOPs a token (MFU's numerator; the lines' JSON text: tests/unit/io/test_json_text.cpp).
#include <gtest/gtest.h>

#include "train/metrics_window.hpp"

namespace zt::train {
namespace {

// MFU's FLOPs a token: 6 N + 12 L C T (GPT-2 124M: N = 124,439,808 - 786,432 for the position table);
// a LoRA run counts 4 N for its frozen base and 6 x its adapters.
TEST(Mfu, FlopsPerTokenOfFullTrainingAndOfLora) {
  const std::uint64_t n = 124439808 - 1024 * 768;
  const double attention = 12.0 * 12 * 768 * 1024;
  EXPECT_DOUBLE_EQ(flops_per_token(12, 768, 1024, n), 6.0 * static_cast<double>(n) + attention);
  EXPECT_DOUBLE_EQ(flops_per_token(12, 768, 1024, n, 294912), 4.0 * static_cast<double>(n) + 6.0 * 294912 + attention);
}

}  // namespace
}  // namespace zt::train
