// The divisors of a positive integer, for refusals that suggest valid values ("n_head in {1, 2, 4, 8}",
// the nearest rl.mini_batch that divides rl.batch).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace zt {

// The divisors of n >= 1 up to `limit`, ascending. Pairs (d, n/d) up to sqrt(n): a refusal's suggestions are
// built many times over by the planner's fixes, and the batch keys reach 2^24 (train.global_batch) and beyond
// (rl.batch: a walk over 1..n took 5 minutes at 6.9e10, outside sweep 37 F3).
inline std::vector<std::int64_t> divisors(std::int64_t n, std::int64_t limit = std::numeric_limits<std::int64_t>::max()) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    if (d <= limit) out.push_back(d);
    if (n / d != d && n / d <= limit) out.push_back(n / d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace zt
