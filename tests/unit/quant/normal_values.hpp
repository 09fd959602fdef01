// Normal(0, sd^2) test values from a fixed seed, for the NF4 tests (host and backend).
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace zt::quant::testing {

inline std::vector<float> normal(std::size_t n, float sd, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> x(n);
  for (float& v : x) v = d(gen);
  return x;
}

}  // namespace zt::quant::testing
