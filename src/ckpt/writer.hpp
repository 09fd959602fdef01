// Writing a checkpoint (docs/ARCHITECTURE.md "Checkpoint", commit protocol): rank 0 prepares
// step_N.tmp/; every rank writes and fsyncs its files there (write_rank_shard; rank 0 also
// write_model and write_state); once all are done (the caller's barrier), rank 0 writes the manifest
// last and renames the directory (commit). Nothing here is collective: the caller (train/) owns MPI.
#pragma once

#include <functional>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/state.hpp"

namespace zt::ckpt {

namespace fs = std::filesystem;

// Rank 0, before any rank writes: an empty ckpt_dir/step_N.tmp/optim/ (removing what an earlier,
// failed attempt left there), and PART/optim/ for each of `parts` (further models of the checkpoint,
// e.g. kCriticDir). Returns the .tmp directory.
fs::path prepare_tmp_dir(const fs::path& ckpt_dir, std::int64_t step, const std::vector<std::string>& parts = {});

// This rank's optimizer shard: 1-D fp32 `master`, `exp_avg`, `exp_avg_sq` and
// `ranges` [n, 2] u64 (flat offset, numel), closed and fsynced. Throws IoError naming the file.
FileRecord write_rank_shard(const fs::path& dir, const RankShard& shard, std::int64_t step);
// What write_rank_shard from a reader holds at once: a slice of one state (whole chunks), for a plan.
inline constexpr std::uint64_t kStreamedSliceBytes = std::uint64_t{16} << 20;
// Elements [offset, offset + count) of one state of a rank's shard (its ranges concatenated) into out.
using ShardReader = std::function<void(StateKind kind, std::int64_t offset, std::int64_t count, float* out)>;
// The same file, its values read slice by slice (16 MiB) through `read` instead of from shard's vectors
// (left empty): a synchronous save holds one slice of the state (kStreamedSliceBytes).
FileRecord write_rank_shard(const fs::path& dir, const RankShard& shard, std::int64_t step, const ShardReader& read);
// Rank 0: model.h5, every parameter under its HF name with its HF shape (Fletcher-32 per chunk), from
// the full flat fp32 parameters (model.flat_numel floats).
FileRecord write_model(const fs::path& dir, const ModelDesc& model, const float* flat);
// The same from `view`, asked for each parameter's flat range once, in flat order (model.params' order),
// its values valid until the next call: a writer that never holds the whole model (a synchronous save
// gathers its units as they are asked for).
using FlatView = std::function<const float*(std::int64_t offset, std::int64_t count)>;
FileRecord write_model(const fs::path& dir, const ModelDesc& model, const FlatView& view);
// The elements a dataset of these dims takes on disk as the writer stores it: HDF5 allocates its last chunk
// whole (up to 4 MiB a dataset beyond the values), which a free-space estimate must count.
std::uint64_t stored_elements(const std::vector<std::uint64_t>& dims);
FileRecord write_state(const fs::path& dir, const TrainState& state);

// Size and SHA-256 of dir/relative.
FileRecord file_record(const fs::path& dir, const std::string& relative);

// A part's directory (a further model inside a checkpoint, e.g. kCriticDir), once its files are in it:
// its MANIFEST.json, fsynced with the directory entries. Nothing is committed until the checkpoint's
// own commit() renames the directory holding it; the caller lists the part's files (and its manifest)
// in the outer manifest, prefixed with the part's name (part_files).
void seal_part(const fs::path& part_dir, const Manifest& manifest);
// The part's files and its manifest as the outer manifest lists them: "PART/..." paths.
std::vector<FileRecord> part_files(const fs::path& checkpoint_dir, const std::string& part, const Manifest& manifest);

// Rank 0, once every rank's files are in tmp_dir and fsynced: MANIFEST.json (fsynced), the rename of
// tmp_dir to final_dir and an fsync of the parent. A directory already at final_dir (a checkpoint of
// the same step being replaced, e.g. one that failed to verify) is removed first.
void commit(const fs::path& tmp_dir, const fs::path& final_dir, const Manifest& manifest);

}  // namespace zt::ckpt
