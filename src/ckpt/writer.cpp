// Checkpoint files: HDF5 for tensors (checksummed chunks), JSON for the rest, fsync before commit.
#include "ckpt/writer.hpp"

#include <algorithm>
#include <fstream>

#include "ckpt/layout.hpp"
#include "ckpt/manifest.hpp"
#include "core/error.hpp"
#include "core/sha256.hpp"
#include "io/atomic_file.hpp"
#include "io/hdf5.hpp"

namespace zt::ckpt {
namespace {

// model.h5 is also read by other tools, without the manifest: its 4 MiB chunks carry Fletcher-32
// checksums, so a damaged chunk fails to read, by name. The optimizer shards are only ever read after
// the manifest's SHA-256 verified them, so they skip that cost (about 20% of their write time).
constexpr std::uint64_t kChunkElements = 1 << 20;
const io::H5DatasetOptions kChecked{.chunk = kChunkElements, .checksum = true};
const io::H5DatasetOptions kPlain{.chunk = kChunkElements, .checksum = false};

// An asynchronous checkpoint writes from its own thread while the data loader reads shards, and a
// thread-safe HDF5 serializes every call behind one library lock: one H5Dwrite of a whole optimizer
// state (500 MB for GPT-2 124M on one rank) kept the loader waiting ~1 s. Slices of 16 MiB (whole
// chunks) bound that wait to ~0.03 s at the 600 MiB/s measured on the H200 machine's disk, and are what a
// synchronous save holds of the state it streams (memory_plan.cpp save_bytes; 64 MiB until sweep 40 NEW-2).
constexpr std::uint64_t kSliceElements = kStreamedSliceBytes / sizeof(float);
static_assert(kSliceElements % kChunkElements == 0, "slices of whole chunks");

void write_in_slices(io::H5Dataset&& ds, const std::vector<float>& values) {
  for (std::uint64_t at = 0; at < values.size(); at += kSliceElements) {
    const std::uint64_t n = std::min<std::uint64_t>(kSliceElements, values.size() - at);
    ds.write(at, std::span<const float>(values.data() + at, n));
  }
}

std::vector<std::uint64_t> ranges_table(const std::vector<FlatRange>& ranges) {
  std::vector<std::uint64_t> out;
  for (const FlatRange& r : ranges) {
    out.push_back(static_cast<std::uint64_t>(r.offset));
    out.push_back(static_cast<std::uint64_t>(r.numel));
  }
  return out;
}

}  // namespace

fs::path prepare_tmp_dir(const fs::path& ckpt_dir, std::int64_t step, const std::vector<std::string>& parts) {
  const fs::path tmp = ckpt_dir / (step_dir_name(step) + kTmpSuffix);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::path made = tmp / "optim";
  if (!ec) fs::create_directories(made, ec);
  for (std::size_t i = 0; i < parts.size() && !ec; ++i) fs::create_directories(made = tmp / parts[i] / "optim", ec);
  if (ec)
    throw IoError(cat("cannot create the checkpoint directory ", made.string(), ": ", ec.message(),
                      " (check ckpt.dir: it must be writable by every rank and shared between nodes)"));
  return tmp;
}

namespace {
// A rank's optimizer shard file: its attributes, the three states (each written by write_kind), the
// ranges; closed, fsynced, recorded.
FileRecord write_shard_file(const fs::path& dir, const RankShard& shard, std::int64_t step,
                            const std::function<void(StateKind, io::H5Dataset&&)>& write_kind) {
  const std::string rel = optim_file_name(shard.rank, shard.world_size);
  const fs::path path = dir / rel;
  {
    io::H5File f = io::H5File::create(path.string());
    f.set_attr("format", std::string("ztrain-optim-shard"));
    f.set_attr("format_version", std::uint64_t{kFormatVersion});
    f.set_attr("rank", static_cast<std::uint64_t>(shard.rank));
    f.set_attr("world_size", static_cast<std::uint64_t>(shard.world_size));
    f.set_attr("step", static_cast<std::uint64_t>(step));
    const auto n = static_cast<std::uint64_t>(shard.numel());
    for (StateKind kind : kStateKinds) write_kind(kind, f.create_dataset(dataset_name(kind), io::H5Type::kF32, n, kPlain));
    const std::vector<std::uint64_t> table = ranges_table(shard.ranges);
    f.create_dataset("ranges", io::H5Type::kU64, {shard.ranges.size(), 2}).write_all(table);
    f.close();  // where HDF5 writes what it buffered: a full disk fails here at the latest
  }
  io::fsync_path(path);
  return file_record(dir, rel);
}
}  // namespace

FileRecord write_rank_shard(const fs::path& dir, const RankShard& shard, std::int64_t step) {
  return write_shard_file(dir, shard, step, [&](StateKind kind, io::H5Dataset&& ds) {
    const std::vector<float>& values = shard.of(kind);
    ZT_CHECK_EQ(values.size(), static_cast<std::size_t>(shard.numel()), dataset_name(kind), " of rank ", shard.rank);
    write_in_slices(std::move(ds), values);
  });
}

FileRecord write_rank_shard(const fs::path& dir, const RankShard& shard, std::int64_t step, const ShardReader& read) {
  std::vector<float> slice;
  return write_shard_file(dir, shard, step, [&](StateKind kind, io::H5Dataset&& ds) {
    const std::int64_t n = shard.numel();
    for (std::int64_t at = 0; at < n; at += static_cast<std::int64_t>(kSliceElements)) {
      const std::int64_t count = std::min<std::int64_t>(static_cast<std::int64_t>(kSliceElements), n - at);
      slice.resize(static_cast<std::size_t>(count));
      read(kind, at, count, slice.data());
      ds.write(static_cast<std::uint64_t>(at), std::span<const float>(slice.data(), slice.size()));
    }
  });
}

std::uint64_t stored_elements(const std::vector<std::uint64_t>& dims) {
  if (dims.empty() || dims[0] == 0) return 0;
  std::uint64_t row = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) row *= dims[i];
  if (row == 0) return 0;
  // As io::H5File::create_dataset chunks it: whole rows, at most kChunkElements, at most the dataset.
  const std::uint64_t rows = std::clamp<std::uint64_t>(kChunkElements / row, 1, dims[0]);
  return (dims[0] + rows - 1) / rows * rows * row;
}

FileRecord write_model(const fs::path& dir, const ModelDesc& model, const float* flat) {
  return write_model(dir, model, [flat](std::int64_t offset, std::int64_t) { return flat + offset; });
}

FileRecord write_model(const fs::path& dir, const ModelDesc& model, const FlatView& view) {
  const fs::path path = dir / kModelFile;
  {
    io::H5File f = io::H5File::create(path.string());
    f.set_attr("format", std::string("ztrain-model"));
    f.set_attr("format_version", std::uint64_t{kFormatVersion});
    for (const auto& [key, value] : model.hyper) f.set_attr(key, static_cast<std::uint64_t>(value));
    for (const ParamDesc& p : model.params) {
      const float* values = view(p.flat_offset, p.numel());
      const std::vector<std::uint64_t> dims(p.hf_shape.begin(), p.hf_shape.end());
      f.create_dataset(p.name, io::H5Type::kF32, dims, kChecked)
          .write_all(std::span<const float>(values, static_cast<std::size_t>(p.hf_numel())));
    }
    f.close();
  }
  io::fsync_path(path);
  return file_record(dir, kModelFile);
}

FileRecord write_state(const fs::path& dir, const TrainState& state) {
  io::write_file_atomic(dir / kStateFile, state_json(state));
  return file_record(dir, kStateFile);
}

FileRecord file_record(const fs::path& dir, const std::string& relative) {
  const fs::path path = dir / relative;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(cat("cannot read back ", path.string(), " to checksum it"));
  Sha256 sha;
  std::vector<char> block(1 << 20);
  FileRecord rec{relative, 0, ""};
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    sha.update(block.data(), n);
    rec.bytes += n;
  }
  if (in.bad()) throw IoError(cat("reading ", path.string(), " failed"));
  rec.sha256 = to_hex(sha.finish());
  return rec;
}

void seal_part(const fs::path& part_dir, const Manifest& manifest) {
  io::fsync_path(part_dir / "optim");  // the other ranks' file entries
  io::write_file_atomic(part_dir / kManifestFile, manifest_json(manifest));  // fsyncs it and part_dir
}

std::vector<FileRecord> part_files(const fs::path& checkpoint_dir, const std::string& part, const Manifest& manifest) {
  std::vector<FileRecord> out;
  for (const FileRecord& f : manifest.files) out.push_back({part + "/" + f.path, f.bytes, f.sha256});
  out.push_back(file_record(checkpoint_dir, part + "/" + kManifestFile));
  return out;
}

void commit(const fs::path& tmp_dir, const fs::path& final_dir, const Manifest& manifest) {
  seal_part(tmp_dir, manifest);
  std::error_code ec;
  if (fs::exists(final_dir, ec)) fs::remove_all(final_dir, ec);
  if (ec) throw IoError(cat("cannot replace the old ", final_dir.string(), ": ", ec.message()));
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) throw IoError(cat("cannot rename ", tmp_dir.string(), " to ", final_dir.string(), ": ", ec.message()));
  io::fsync_path(final_dir.parent_path().empty() ? fs::path(".") : final_dir.parent_path());
}

}  // namespace zt::ckpt
