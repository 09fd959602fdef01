// SHA-256 compression in hardware (x86 SHA extensions), used by Sha256 where the CPU has them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zt::detail {
bool sha256_hw_available();
// Compresses n_blocks 64-byte blocks into state (8 words, FIPS 180-4 order).
void sha256_hw_compress(std::uint32_t state[8], const std::uint8_t* data, std::size_t n_blocks);
}  // namespace zt::detail
