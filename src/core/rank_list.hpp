// Ranks in messages: "0, 2, 3" or "1-3" for ranks in increasing order (hang reports, a communicator's members).
#pragma once

#include <string>
#include <vector>

#include "core/error.hpp"

namespace zt {

inline std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += cat(out.empty() ? "" : ", ", ranks[i]);
    if (j >= i + 2) out += cat("-", ranks[j]);
    else if (j == i + 1) out += cat(", ", ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace zt
