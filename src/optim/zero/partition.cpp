// Partition arithmetic.
#include "optim/zero/partition.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace zt::optim {

Partition::Partition(std::vector<FlatRange> units, std::vector<ParamRange> params, int world_size, int rank)
    : units_(std::move(units)), world_(world_size), rank_(rank) {
  ZT_CHECK_GE(world_size, 1);
  ZT_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " outside world ", world_size);
  std::int64_t expected_offset = units_.empty() ? 0 : units_.front().offset;
  for (const FlatRange& u : units_) {
    ZT_CHECK_EQ(u.offset, expected_offset, "units must be contiguous and in flat order");
    expected_offset += u.numel;
    const std::int64_t shard = (u.numel + world_ - 1) / world_;
    shard_.push_back(shard);
    padded_offset_.push_back(total_padded_);
    shard_offset_.push_back(total_shard_);
    total_padded_ += shard * world_;
    total_shard_ += shard;
  }
  build_pieces(params);
}

FlatRange Partition::owned(int u, int r) const {
  const FlatRange& unit = units_[u];
  return intersect(unit, FlatRange{unit.offset + r * shard_[u], shard_[u]});
}

void Partition::build_pieces(const std::vector<ParamRange>& params) {
  for (int u = 0; u < n_units(); ++u) {
    const FlatRange mine = owned(u, rank_);
    const std::int64_t slice_start = units_[u].offset + rank_ * shard_[u];
    for (const ParamRange& p : params) {
      const FlatRange overlap = intersect(mine, p.range);
      if (overlap.numel == 0) continue;
      pieces_.push_back({shard_offset_[u] + (overlap.offset - slice_start), overlap.offset, overlap.numel, p.decay, u});
    }
  }
  std::sort(pieces_.begin(), pieces_.end(),
            [](const ShardPiece& a, const ShardPiece& b) { return a.shard_offset < b.shard_offset; });
}

}  // namespace zt::optim
