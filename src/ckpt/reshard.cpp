// Offline resharding: one new rank at a time, so memory stays at one shard.
#include "ckpt/reshard.hpp"

#include <algorithm>

#include "ckpt/layout.hpp"
#include "ckpt/verify.hpp"
#include "ckpt/writer.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace zt::ckpt {
namespace fs = std::filesystem;

namespace {

// The new rank shards, model.h5 and state.json in tmp; the manifest to commit them with.
Manifest write_resharded(const Checkpoint& src, int world_size, const RangesOf& ranges_of, const fs::path& tmp) {
  std::error_code ec;
  Manifest m = src.manifest();
  m.world_size = world_size;
  m.rank_ranges.clear();
  m.files.clear();
  for (int r = 0; r < world_size; ++r) {
    m.rank_ranges.push_back(ranges_of(r));
    m.files.push_back(write_rank_shard(tmp, src.read_shard(r, world_size, m.rank_ranges.back()), m.step));
  }
  for (const char* name : {kModelFile, kStateFile}) {
    fs::copy_file(src.dir() / name, tmp / name, ec);
    if (ec) throw IoError(cat("cannot copy ", (src.dir() / name).string(), ": ", ec.message()));
    io::fsync_path(tmp / name);
    m.files.push_back(file_record(tmp, name));
  }
  std::sort(m.files.begin(), m.files.end(), [](const FileRecord& a, const FileRecord& b) { return a.path < b.path; });
  return m;
}

}  // namespace

Manifest reshard(const Checkpoint& src, int world_size, const RangesOf& ranges_of, const fs::path& out_dir,
                 const RangesOf& critic_ranges_of) {
  ZT_CHECK_GE(world_size, 1);
  const bool critic = has_critic(src.manifest());
  if (critic && !critic_ranges_of)
    throw CheckpointError(cat(src.dir().string(), " holds a PPO critic (", kCriticDir, "/) this reshard has no partition for"));
  const fs::path tmp = out_dir.string() + kTmpSuffix;
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!ec) fs::create_directories(tmp / "optim", ec);
  if (!ec && critic) fs::create_directories(tmp / kCriticDir / "optim", ec);
  if (ec) throw IoError(cat("cannot create the directories of ", tmp.string(), ": ", ec.message()));
  try {
    Manifest m = write_resharded(src, world_size, ranges_of, tmp);
    if (critic) {  // sealed inside tmp: committed with the actor by the rename
      const Manifest part = write_resharded(Checkpoint(src.dir() / kCriticDir), world_size, critic_ranges_of, tmp / kCriticDir);
      seal_part(tmp / kCriticDir, part);
      const std::vector<FileRecord> files = part_files(tmp, kCriticDir, part);
      m.files.insert(m.files.end(), files.begin(), files.end());
      std::sort(m.files.begin(), m.files.end(), [](const FileRecord& a, const FileRecord& b) { return a.path < b.path; });
    }
    commit(tmp, out_dir, m);
    return m;
  } catch (...) {
    fs::remove_all(tmp, ec);  // nothing half-written left behind (a full disk)
    throw;
  }
}

}  // namespace zt::ckpt
