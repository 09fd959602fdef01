// RoPE's inverse frequencies for one head size, as Hugging Face computes them (modeling_rope_utils.py:
// _compute_default_rope_parameters, and _compute_llama3_parameters for Llama 3.1's long-context
// scaling), op for op in fp32, so the rotation angles match the reference model's.
#pragma once

#include <cstdint>
#include <vector>

namespace zt::model {

struct RopeParams {
  double theta = 500000;  // rope_theta
  bool llama3 = false;    // rope_scaling.rope_type == "llama3"
  double factor = 8, low_freq_factor = 1, high_freq_factor = 4;
  std::int64_t original_max_position = 8192;
  bool operator==(const RopeParams&) const = default;
};

// inv_freq[i] = 1 / theta^(2i/hs) for i < hs/2, then llama3-scaled if asked: wavelengths 2 pi / inv_freq
// longer than original/low_freq_factor divided by factor, shorter than original/high_freq_factor kept,
// and those in between interpolated smoothly.
std::vector<float> rope_inv_freq(int head_size, const RopeParams& p);

}  // namespace zt::model
