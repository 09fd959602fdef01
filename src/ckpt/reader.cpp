// Range intersection reads over the rank files of a checkpoint.
#include "ckpt/reader.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "ckpt/layout.hpp"
#include "ckpt/manifest.hpp"
#include "core/error.hpp"
#include "io/hdf5.hpp"

namespace zt::ckpt {

Checkpoint::Checkpoint(std::filesystem::path dir)
    : dir_(std::move(dir)), manifest_(parse_manifest(read_text(dir_ / kManifestFile), (dir_ / kManifestFile).string())) {}

Checkpoint::~Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;

TrainState Checkpoint::state() const {
  const std::filesystem::path path = dir_ / kStateFile;
  return parse_state(read_text(path), path.string());
}

const io::H5File& Checkpoint::rank_file(int rank) const {
  auto it = files_.find(rank);
  if (it != files_.end()) return *it->second;
  const std::string path = (dir_ / optim_file_name(rank, manifest_.world_size)).string();
  auto file = std::make_unique<io::H5File>(io::H5File::open_read(path));
  const std::vector<FlatRange>& ranges = manifest_.rank_ranges.at(rank);
  std::vector<std::uint64_t> table(2 * ranges.size());
  io::H5Dataset saved = file->open_dataset("ranges");
  if (saved.dims() != std::vector<std::uint64_t>{ranges.size(), 2})
    throw CheckpointError(cat(path, ": its ranges differ from the manifest's (", ranges.size(), " expected)"));
  saved.read_all(table);
  std::uint64_t numel = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (table[2 * i] != static_cast<std::uint64_t>(ranges[i].offset) || table[2 * i + 1] != static_cast<std::uint64_t>(ranges[i].numel))
      throw CheckpointError(cat(path, ": range ", i, " differs from the manifest's"));
    numel += table[2 * i + 1];
  }
  for (StateKind kind : kStateKinds)
    if (file->open_dataset(dataset_name(kind)).length() != numel)
      throw CheckpointError(cat(path, ": dataset ", dataset_name(kind), " does not hold the ", numel, " elements its ranges cover"));
  return *files_.emplace(rank, std::move(file)).first->second;
}

const std::vector<Checkpoint::Saved>& Checkpoint::saved_index() const {
  if (!index_.empty()) return index_;
  for (int r = 0; r < manifest_.world_size; ++r) {
    std::int64_t position = 0;  // where the current range starts in rank r's datasets
    for (const FlatRange& saved : manifest_.rank_ranges[r]) {
      if (saved.numel > 0) index_.push_back({saved, r, position});
      position += saved.numel;
    }
  }
  std::sort(index_.begin(), index_.end(), [](const Saved& a, const Saved& b) { return a.range.offset < b.range.offset; });
  return index_;
}

// A NaN or an infinity in a checkpoint's state (a run that diverged before it saved, or a damaged file
// whose manifest was rewritten) would make the resumed run's loss NaN from its first step: refused at
// load (InputError: the checkpoint chosen is bad input), naming the file, the state and the tensor.
void Checkpoint::check_finite(StateKind kind, int rank, const FlatRange& range, const float* values) const {
  std::int64_t bad = 0;
  while (bad < range.numel && std::isfinite(values[bad])) ++bad;
  if (bad == range.numel) return;
  const std::int64_t at = range.offset + bad;
  const std::vector<ParamDesc>& params = manifest_.model.params;
  auto p = std::upper_bound(params.begin(), params.end(), at,
                            [](std::int64_t i, const ParamDesc& d) { return i < d.flat_offset; });
  const std::string where = p == params.begin() ? cat("flat element ", at)
                                                : cat("tensor ", std::prev(p)->name, " (element ", at - std::prev(p)->flat_offset, ")");
  throw InputError(cat(dir_.string(), ": ", optim_file_name(rank, manifest_.world_size), " holds ", values[bad], " in ",
                       dataset_name(kind), " of ", where, "; a run resumed from it would compute NaN losses: the run "
                       "that saved it had diverged, or the file is damaged. Resume from an earlier checkpoint "
                       "(ckpt.resume=PATH) with a lower optim.lr"));
}

void Checkpoint::read(StateKind kind, const FlatRange& want, float* out) const {
  std::int64_t covered = 0;
  const std::vector<Saved>& index = saved_index();
  // The last saved range starting at or before want, then those after it that start inside want.
  auto it = std::upper_bound(index.begin(), index.end(), want.offset,
                             [](std::int64_t at, const Saved& s) { return at < s.range.offset; });
  if (it != index.begin()) --it;
  for (; it != index.end() && it->range.offset < want.offset + want.numel; ++it) {
    const FlatRange both = intersect(it->range, want);
    if (both.numel <= 0) continue;
    io::H5Dataset ds = rank_file(it->rank).open_dataset(dataset_name(kind));
    float* piece = out + (both.offset - want.offset);
    ds.read(static_cast<std::uint64_t>(it->position + both.offset - it->range.offset),
            std::span<float>(piece, static_cast<std::size_t>(both.numel)));
    check_finite(kind, it->rank, both, piece);
    covered += both.numel;
  }
  // Saved ranges never overlap (verify() checks), so the count tells whether `want` is covered.
  if (covered != want.numel)
    throw CheckpointError(cat(dir_.string(), ": the saved ranges cover ", covered, " of the ", want.numel,
                              " elements [", want.offset, ", +", want.numel, ") of ", dataset_name(kind)));
}

RankShard Checkpoint::read_shard(int rank, int world_size, const std::vector<FlatRange>& ranges) const {
  RankShard shard{rank, world_size, ranges, {}, {}, {}};
  for (StateKind kind : kStateKinds) {
    std::vector<float>& values = shard.of(kind);
    values.resize(static_cast<std::size_t>(shard.numel()));
    std::int64_t at = 0;
    for (const FlatRange& r : ranges) {
      read(kind, r, values.data() + at);
      at += r.numel;
    }
  }
  return shard;
}

std::vector<float> Checkpoint::read_master() const {
  std::vector<float> flat(static_cast<std::size_t>(manifest_.model.flat_numel));
  read(StateKind::kMaster, {0, manifest_.model.flat_numel}, flat.data());
  return flat;
}

}  // namespace zt::ckpt
