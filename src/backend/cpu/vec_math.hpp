// Vectorisable float math for the CPU ops' inner loops: an exp the compiler can inline into SIMD loops
// (libm's expf/tanhf are scalar calls without -ffast-math), and per-ISA clones of the hot kernels.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

// Hot kernels are compiled for AVX-512, AVX2 and baseline x86-64 and picked at load time (GCC
// target_clones), so one binary runs anywhere and uses the widest vectors the CPU has. Results are
// reproducible on a given machine; another ISA may round reductions differently.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZT_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ZT_SIMD_CLONES
#endif

namespace zt::backend::cpu {

// e^x, relative error about 2e-7 (Cephes expf: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2,
// degree-6 polynomial for e^r, then scaling by 2^n through the exponent bits). x is clamped to
// [-87.3, 88.3]: e^x below that returns ~1e-38 (harmless next to a softmax sum >= 1).
inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.3f), 88.3f);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: t + kRound - kRound rounds t to an integer
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;  // ln 2 split in a high and a low part
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  return er * std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
}

}  // namespace zt::backend::cpu
