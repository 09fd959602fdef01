// A contiguous range of the model's flat parameter buffer: the one type the ZeRO partition (optim/),
// the checkpoint descriptors (ckpt/) and the tensor-parallel mapping of shards (model/tp_split) share,
// so a range passes between them without conversion.
#pragma once

#include <algorithm>
#include <cstdint>

namespace zt {

struct FlatRange {
  std::int64_t offset = 0;
  std::int64_t numel = 0;
  std::int64_t end() const { return offset + numel; }
  bool operator==(const FlatRange&) const = default;
};

// The intersection of two ranges (numel 0 if they do not overlap): resharding's primitive.
inline FlatRange intersect(const FlatRange& a, const FlatRange& b) {
  const std::int64_t lo = std::max(a.offset, b.offset), hi = std::min(a.end(), b.end());
  return hi > lo ? FlatRange{lo, hi - lo} : FlatRange{lo, 0};
}

}  // namespace zt
