// RoPE frequencies in HF's fp32 order of operations (torch evaluates `scalar / tensor` as
// reciprocal(tensor) * scalar, and tensor-scalar ops in fp32 with the scalar rounded to fp32).
#include "model/rope.hpp"

#include <cmath>
#include <numbers>

#include "core/error.hpp"

namespace zt::model {
namespace {

float rdiv(double scalar, float x) { return (1.0f / x) * static_cast<float>(scalar); }

// _compute_llama3_parameters, element-wise.
float llama3_scaled(float inv, const RopeParams& p) {
  const float factor = static_cast<float>(p.factor), low = static_cast<float>(p.low_freq_factor);
  const double old_len = static_cast<double>(p.original_max_position);
  const float low_freq_wavelen = static_cast<float>(old_len / p.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(old_len / p.high_freq_factor);
  const float wavelen = rdiv(2 * std::numbers::pi, inv);
  const float scaled = wavelen > low_freq_wavelen ? inv / factor : inv;
  const float smooth = (rdiv(old_len, wavelen) - low) / static_cast<float>(p.high_freq_factor - p.low_freq_factor);
  const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
  const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
  return medium ? smoothed : scaled;
}

}  // namespace

std::vector<float> rope_inv_freq(int head_size, const RopeParams& p) {
  ZT_CHECK(head_size > 0 && head_size % 2 == 0, "rope_inv_freq: head size ", head_size, " must be even");
  std::vector<float> inv(head_size / 2);
  const float base = static_cast<float>(p.theta), dim = static_cast<float>(head_size);
  for (int i = 0; i < head_size / 2; ++i) {
    const float e = static_cast<float>(2 * i) / dim;
    inv[i] = 1.0f / std::pow(base, e);
    if (p.llama3) inv[i] = llama3_scaled(inv[i], p);
  }
  return inv;
}

}  // namespace zt::model
