// 16-bit float conversions on the host (bf16 and IEEE fp16 <-> fp32), round to nearest even, NaN kept.
// Used by the CPU backend's cast and by safetensors loading; CUDA kernels use their own intrinsics.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace zt::backend {

inline float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24 (exact in float; a product, so loops can vectorise)
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline std::uint16_t f32_to_f16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (a < 0x38800000u)  // below 2^-14: a subnormal half, mant = round(|f| * 2^24) (exact product)
    return sign | static_cast<std::uint16_t>(std::nearbyint(std::fabs(f) * 16777216.0f));
  a += 0xfffu + ((a >> 13) & 1u);  // round the 13 dropped bits to nearest even (may carry into exp)
  return sign | static_cast<std::uint16_t>((a - (112u << 23)) >> 13);
}

}  // namespace zt::backend
