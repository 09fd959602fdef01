// Reading a committed checkpoint. Any range of the flat state is read from whichever rank files
// cover it (the intersection of saved and wanted ranges), so a checkpoint written by W ranks at any
// ZeRO stage loads on W' ranks at any stage: resume and `zckpt reshard` both read through here.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/state.hpp"

namespace zt::io {
class H5File;
}

namespace zt::ckpt {

class Checkpoint {
 public:
  // Parses dir/MANIFEST.json (verify() checks the files first). Throws CheckpointError.
  explicit Checkpoint(std::filesystem::path dir);
  ~Checkpoint();
  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  TrainState state() const;  // state.json

  // Reads `kind` over flat elements [want) into out (want.numel floats) from the rank files that
  // hold them. Throws CheckpointError if the saved ranges do not cover `want`, InputError (naming the
  // file and the tensor) on a NaN or an infinity.
  void read(StateKind kind, const FlatRange& want, float* out) const;
  // Every rank's shard for a new partition: `ranges` of the new rank, all three kinds.
  RankShard read_shard(int rank, int world_size, const std::vector<FlatRange>& ranges) const;
  // The full flat master weights (model.flat_numel floats): exact, unlike a rounded model copy.
  std::vector<float> read_master() const;

 private:
  const io::H5File& rank_file(int rank) const;  // opened once, its ranges checked against the manifest
  void check_finite(StateKind kind, int rank, const FlatRange& range, const float* values) const;
  // Every rank's saved ranges sorted by offset, with where each starts in its rank's datasets: a read
  // looks up the few it needs (a tensor-parallel checkpoint saves a run per matrix row: many ranges).
  struct Saved {
    FlatRange range;
    int rank = 0;
    std::int64_t position = 0;
  };
  const std::vector<Saved>& saved_index() const;

  std::filesystem::path dir_;
  Manifest manifest_;
  mutable std::map<int, std::unique_ptr<io::H5File>> files_;
  mutable std::vector<Saved> index_;
};

}  // namespace zt::ckpt
