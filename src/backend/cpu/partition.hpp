// Fixed work partitions for the CPU ops. A partition depends only on the sizes and the thread count,
// never on timing, which is what makes the ops bitwise reproducible for a given thread count.
#pragma once

#include <algorithm>
#include <cstdint>

namespace zt::backend::cpu {

// [begin, end) of column strip p when `total` columns are cut into `parts` strips of whole cache lines
// (16 floats), so no two threads ever write the same line. Later strips may be empty.
inline void column_strip(std::int64_t total, int parts, int p, std::int64_t& begin, std::int64_t& end) {
  const std::int64_t step = ((total + parts - 1) / parts + 15) / 16 * 16;
  begin = std::min(total, step * p);
  end = std::min(total, begin + step);
}

}  // namespace zt::backend::cpu
