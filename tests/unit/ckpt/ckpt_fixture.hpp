// A small synthetic checkpoint for the ckpt unit tests: 3 units of odd sizes, every element's value a
// known function of (kind, flat index), written for any world size with an even per-unit split.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/layout.hpp"
#include "ckpt/state.hpp"
#include "ckpt/writer.hpp"
#include "tests/unit/temp_dir.hpp"

namespace zt::ckpt::test {

namespace fs = std::filesystem;

struct TempDir : zt::test::TempDir {
  TempDir() : zt::test::TempDir("ckpt_test") {}
};

inline ModelDesc tiny_model() {
  ModelDesc m;
  m.hyper = {{"n_layer", 1}};
  m.params = {{"a.weight", {2, 3}, {2, 3}, 0}, {"b.weight", {7}, {5}, 6}, {"c.bias", {4}, {4}, 13}};
  m.units = {{0, 6}, {6, 7}, {13, 4}};
  m.flat_numel = 17;
  return m;
}

inline float value_of(StateKind kind, std::int64_t i) { return static_cast<float>(i) + 0.25f * static_cast<int>(kind); }

// Rank r of W owns the r-th slice of every unit, slices ceil(numel / W) long (partition.hpp's rule).
inline std::vector<FlatRange> ranges_for(const ModelDesc& m, int world, int rank) {
  std::vector<FlatRange> out;
  for (const FlatRange& u : m.units) {
    const std::int64_t slice = (u.numel + world - 1) / world;
    const FlatRange r = intersect(u, {u.offset + rank * slice, slice});
    if (r.numel > 0) out.push_back(r);
  }
  return out;
}

// One element of the saved state replaced (by a NaN or an infinity: a diverged run's checkpoint).
struct Poison {
  StateKind kind = StateKind::kMaster;
  std::int64_t index = -1;  // flat index; -1: none
  float value = 0;
};

inline RankShard shard_for(const ModelDesc& m, int world, int rank, const Poison& poison = {}) {
  RankShard s{rank, world, ranges_for(m, world, rank), {}, {}, {}};
  for (StateKind kind : kStateKinds)
    for (const FlatRange& r : s.ranges)
      for (std::int64_t i = r.offset; i < r.offset + r.numel; ++i)
        s.of(kind).push_back(kind == poison.kind && i == poison.index ? poison.value : value_of(kind, i));
  return s;
}

// The tiny model's files for `world` ranks in dir (its optim/ made); the manifest that lists them.
inline Manifest write_files(const fs::path& dir, std::int64_t step, int world, const std::string& run_id,
                            const Poison& poison) {
  const ModelDesc m = tiny_model();
  Manifest man{kFormatVersion, step, world, 1, m, {}, {}, run_id};
  for (int r = 0; r < world; ++r) {
    man.rank_ranges.push_back(ranges_for(m, world, r));
    man.files.push_back(write_rank_shard(dir, shard_for(m, world, r, poison), step));
  }
  std::vector<float> flat(17);
  for (int i = 0; i < 17; ++i) flat[i] = value_of(StateKind::kMaster, i);
  man.files.push_back(write_model(dir, m, flat.data()));
  TrainState st;
  st.step = step;
  st.tokens = 100 * static_cast<std::uint64_t>(step);
  st.config_ini = "[train]\nseed = 3\n";
  man.files.push_back(write_state(dir, st));
  return man;
}

// Writes and commits ckpt_dir/step_N for `world` ranks, owned by run_id ("": owner unknown); returns
// its directory. critic: with a PPO critic part (kCriticDir, the same tiny model) as the trainer writes it.
inline fs::path write_checkpoint(const fs::path& ckpt_dir, std::int64_t step, int world, const std::string& run_id = "",
                                 const Poison& poison = {}, bool critic = false) {
  const fs::path tmp = prepare_tmp_dir(ckpt_dir, step, critic ? std::vector<std::string>{kCriticDir} : std::vector<std::string>{});
  Manifest man = write_files(tmp, step, world, run_id, poison);
  if (critic) {
    const Manifest part = write_files(tmp / kCriticDir, step, world, run_id, {});
    seal_part(tmp / kCriticDir, part);
    const std::vector<FileRecord> files = part_files(tmp, kCriticDir, part);
    man.files.insert(man.files.end(), files.begin(), files.end());
  }
  const fs::path final_dir = ckpt_dir / step_dir_name(step);
  commit(tmp, final_dir, man);
  return final_dir;
}

}  // namespace zt::ckpt::test
