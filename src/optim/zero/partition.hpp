// The ZeRO partition (one rule for every stage, as FSDP's flat parameters): parameters are grouped in
// units (embeddings, each block, the final LayerNorm); each unit's numel is padded to a multiple of
// the world size W and rank r owns the r-th equal slice of every unit. Units are what ZeRO-3 gathers
// before use and what a reduce-scatter covers, so collectives are balanced. The partition depends only
// on the units and W, never on bucket size, so resharding is an intersection of global flat ranges.
#pragma once

#include <cstdint>
#include <vector>

#include "core/flat_range.hpp"

namespace zt::optim {

// A range of the model's (unpadded) flat parameter space and the intersection of two (numel 0 if they
// do not overlap): one type with ckpt/ (core/flat_range.hpp).
using zt::FlatRange;
using zt::intersect;

// One parameter's range and whether weight decay applies to it (2-D weights).
struct ParamRange {
  FlatRange range;
  bool decay = false;
};

// A piece of this rank's shard: `numel` elements at shard_offset in the shard buffers that hold the
// model's flat elements [flat_offset, flat_offset + numel), all with the same decay flag.
struct ShardPiece {
  std::int64_t shard_offset, flat_offset, numel;
  bool decay;
  int unit;
};

class Partition {
 public:
  Partition() = default;
  // units: the model's units in flat order (contiguous, covering the parameters); params: every
  // parameter with its decay flag (one split over units counts in each).
  Partition(std::vector<FlatRange> units, std::vector<ParamRange> params, int world_size, int rank);

  int world_size() const { return world_; }
  int rank() const { return rank_; }
  int n_units() const { return static_cast<int>(units_.size()); }
  const FlatRange& unit(int u) const { return units_[u]; }
  const std::vector<FlatRange>& units() const { return units_; }
  // Elements per rank of unit u (its numel rounded up to a multiple of W, divided by W).
  std::int64_t shard_numel(int u) const { return shard_[u]; }
  std::int64_t padded_numel(int u) const { return shard_[u] * world_; }
  // Where unit u starts in the padded full buffer and in this rank's shard buffer.
  std::int64_t padded_offset(int u) const { return padded_offset_[u]; }
  std::int64_t shard_offset(int u) const { return shard_offset_[u]; }
  std::int64_t total_padded_numel() const { return total_padded_; }
  std::int64_t total_shard_numel() const { return total_shard_; }
  // The part of unit u that rank r owns, in flat coordinates (may be empty for the last ranks).
  FlatRange owned(int u, int r) const;
  // This rank's owned elements split by parameter (decay flag), in shard order.
  const std::vector<ShardPiece>& pieces() const { return pieces_; }

 private:
  void build_pieces(const std::vector<ParamRange>& params);

  std::vector<FlatRange> units_;
  std::vector<std::int64_t> shard_, padded_offset_, shard_offset_;
  std::int64_t total_padded_ = 0, total_shard_ = 0;
  int world_ = 1, rank_ = 0;
  std::vector<ShardPiece> pieces_;
};

}  // namespace zt::optim
