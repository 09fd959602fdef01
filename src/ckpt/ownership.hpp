// Which run a checkpoint belongs to. A run id is made once, when a run starts at step 0, and recorded
// in every checkpoint's manifest; a resumed run keeps the id of the checkpoint it resumed from (it is
// the same run going on, e.g. after a requeue). Rotation deletes only the current run's checkpoints;
// checkpoints written before run ids existed have none: "owner unknown", never deleted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace zt::ckpt {

// A new run id: UTC time, host, pid and 32 random bits, printable ([A-Za-z0-9.-]), e.g.
// 20261124T161410Z-node7-4242-9f3a06c1.
std::string new_run_id();

// The run id in dir/MANIFEST.json; "" where there is none or the manifest cannot be read (unknown).
std::string run_id_of(const std::filesystem::path& step_dir);

// "run ID" or "owner unknown: ..." (no readable manifest names a run: written before run ids, or unreadable).
std::string describe_owner(const std::string& run_id);

struct Pruned {
  std::vector<std::filesystem::path> deleted;
  std::vector<std::filesystem::path> foreign;  // committed checkpoints of other (or unknown) runs: kept
};

// Rank 0, after a commit: deletes all but the `keep` newest committed checkpoints of run `run_id`
// (0 = keep all) and the .tmp directories of failed attempts (never a checkpoint; the lock proves their
// writer is gone); `protect` (the checkpoint just committed) is never deleted, nor any checkpoint whose
// manifest names another run or no run.
Pruned prune(const std::filesystem::path& ckpt_dir, std::int64_t keep, const std::filesystem::path& protect,
             const std::string& run_id);

}  // namespace zt::ckpt
