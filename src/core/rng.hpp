// Counter-based randomness (Philox4x32-10, Salmon et al., SC 2011): every value is a pure function of
// (seed, purpose, index), so results never depend on thread count, world size or call order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zt::rng {

// One Philox4x32-10 block: 10 rounds over a 128-bit counter with a 64-bit key.
std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key);

// A stable 64-bit id for a purpose name (FNV-1a), e.g. purpose_id("init/transformer.wte.weight").
std::uint64_t purpose_id(std::string_view name);

// Uniform in [0, 1) with 32 random bits: the first word of block (seed, purpose, index).
double uniform(std::uint64_t seed, std::uint64_t purpose, std::uint64_t index);

// Standard normal N(0, 1) by Box-Muller (1958): block index/2 gives the pair (z0, z1); value `index`
// is z[index % 2], so a range can start anywhere and still give the same numbers.
double normal(std::uint64_t seed, std::uint64_t purpose, std::uint64_t index);

// out[i] = mean + std * normal(seed, purpose, first + i) for i < n, in float.
void fill_normal(std::uint64_t seed, std::uint64_t purpose, std::uint64_t first, float* out, std::size_t n,
                 float mean, float std);

}  // namespace zt::rng
