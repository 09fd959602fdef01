// SHA-256 block compression with the x86 SHA extensions (SHA-NI: Intel since Ice Lake / Goldmont, AMD
// since Zen), about 5x the portable loop: checkpoints checksum every byte they write and verify.
// Follows Intel's "New Instructions Supporting the Secure Hash Algorithm" (2013), 4 rounds per step.
#include "core/sha256_hw.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

namespace zt::detail {

bool sha256_hw_available() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool sha = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));   // CPUID.7.0:EBX.SHA
  const bool sse41 = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) && (c & (1u << 9));  // SSE4.1, SSSE3
  return sha && sse41;
}

__attribute__((target("sha,sse4.1,ssse3")))
void sha256_hw_compress(std::uint32_t state[8], const std::uint8_t* data, std::size_t n_blocks) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  // The instructions keep the state as (A, B, E, F) and (C, D, G, H).
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state)), 0xB1);
  __m128i cdgh = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4)), 0x1B);
  __m128i abef = _mm_alignr_epi8(tmp, cdgh, 8);
  cdgh = _mm_blend_epi16(cdgh, tmp, 0xF0);
  for (; n_blocks > 0; --n_blocks, data += 64) {
    const __m128i abef_in = abef, cdgh_in = cdgh;
    __m128i w[4];  // the message schedule, 4 words per group, a ring of the last 4 groups
    for (int g = 0; g < 16; ++g) {
      if (g < 4) {
        w[g] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * g)), byte_swap);
      } else {  // W[t] = W[t-16] + s0(W[t-15]) + W[t-7] + s1(W[t-2]), 4 words at once
        __m128i x = _mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]);
        x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4));
        w[g % 4] = _mm_sha256msg2_epu32(x, w[(g + 3) % 4]);
      }
      __m128i msg = _mm_add_epi32(w[g % 4], _mm_load_si128(reinterpret_cast<const __m128i*>(kSha256Round + 4 * g)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, msg);  // 2 rounds
      msg = _mm_shuffle_epi32(msg, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, msg);  // 2 more
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }
  tmp = _mm_shuffle_epi32(abef, 0x1B);
  cdgh = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_blend_epi16(tmp, cdgh, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_alignr_epi8(cdgh, tmp, 8));
}

}  // namespace zt::detail

#else

namespace zt::detail {
bool sha256_hw_available() { return false; }
void sha256_hw_compress(std::uint32_t*, const std::uint8_t*, std::size_t) {}
}  // namespace zt::detail

#endif
