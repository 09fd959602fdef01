// Small helpers of the checkpoint descriptors.
#include "ckpt/state.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace zt::ckpt {
namespace {
std::int64_t product(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  return n;
}
}  // namespace

std::int64_t ParamDesc::numel() const { return product(shape); }
std::int64_t ParamDesc::hf_numel() const { return product(hf_shape); }

std::int64_t ModelDesc::hyper_value(const std::string& key) const {
  for (const auto& [k, v] : hyper)
    if (k == key) return v;
  throw CheckpointError(cat("the checkpoint's model description lacks '", key, "'"));
}

const char* dataset_name(StateKind kind) {
  switch (kind) {
    case StateKind::kMaster: return "master";
    case StateKind::kExpAvg: return "exp_avg";
    case StateKind::kExpAvgSq: return "exp_avg_sq";
  }
  return "?";
}

std::vector<float>& RankShard::of(StateKind kind) {
  return kind == StateKind::kMaster ? master : kind == StateKind::kExpAvg ? exp_avg : exp_avg_sq;
}
const std::vector<float>& RankShard::of(StateKind kind) const { return const_cast<RankShard*>(this)->of(kind); }

std::int64_t RankShard::numel() const {
  std::int64_t n = 0;
  for (const FlatRange& r : ranges) n += r.numel;
  return n;
}

std::uint64_t Manifest::total_bytes() const {
  std::uint64_t n = 0;
  for (const FileRecord& f : files) n += f.bytes;
  return n;
}

}  // namespace zt::ckpt
