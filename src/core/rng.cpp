// Philox4x32-10 and the distributions built on it (see rng.hpp). Constants from Random123's philox.h.
#include "core/rng.hpp"

#include <cmath>
#include <numbers>

namespace zt::rng {
namespace {

constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;      // round multipliers
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;    // key schedule (golden ratio, sqrt 3)

std::array<std::uint32_t, 4> block(std::uint64_t seed, std::uint64_t purpose, std::uint64_t counter) {
  return philox4x32_10({static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32),
                        static_cast<std::uint32_t>(purpose), static_cast<std::uint32_t>(purpose >> 32)},
                       {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

// z0, z1 of block `pair`: u1 in (0, 1] (log stays finite), u2 in [0, 1).
void normal_pair(std::uint64_t seed, std::uint64_t purpose, std::uint64_t pair, double& z0, double& z1) {
  const auto x = block(seed, purpose, pair);
  const double u1 = (static_cast<double>(x[0]) + 1.0) * 0x1p-32;
  const double u2 = static_cast<double>(x[1]) * 0x1p-32;
  const double r = std::sqrt(-2.0 * std::log(u1));
  z0 = r * std::cos(2.0 * std::numbers::pi * u2);
  z1 = r * std::sin(2.0 * std::numbers::pi * u2);
}

}  // namespace

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> c, std::array<std::uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(p0)};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

std::uint64_t purpose_id(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a offset basis and prime
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

double uniform(std::uint64_t seed, std::uint64_t purpose, std::uint64_t index) {
  return static_cast<double>(block(seed, purpose, index)[0]) * 0x1p-32;
}

double normal(std::uint64_t seed, std::uint64_t purpose, std::uint64_t index) {
  double z0, z1;
  normal_pair(seed, purpose, index / 2, z0, z1);
  return index % 2 ? z1 : z0;
}

void fill_normal(std::uint64_t seed, std::uint64_t purpose, std::uint64_t first, float* out, std::size_t n,
                 float mean, float std) {
  std::size_t i = 0;
  if (n > 0 && first % 2 == 1) out[i++] = static_cast<float>(mean + std * normal(seed, purpose, first));
  for (; i + 1 < n; i += 2) {  // whole pairs: one block gives both
    double z0, z1;
    normal_pair(seed, purpose, (first + i) / 2, z0, z1);
    out[i] = static_cast<float>(mean + std * z0);
    out[i + 1] = static_cast<float>(mean + std * z1);
  }
  if (i < n) out[i] = static_cast<float>(mean + std * normal(seed, purpose, first + i));
}

}  // namespace zt::rng
