// Offline resharding (`zckpt reshard`): the same checkpoint for another world size, read through
// Checkpoint::read, the intersection code resume uses.
#pragma once

#include <filesystem>
#include <functional>
#include <vector>

#include "ckpt/reader.hpp"

namespace zt::ckpt {

// Writes src as a checkpoint of `world_size` ranks at out_dir (built in out_dir.tmp, then committed):
// rank r's optimizer shard covers ranges_of(r) (the caller's partition); model.h5 and state.json are
// copied. A PPO checkpoint's critic (critic/) is resharded the same way, over critic_ranges_of (the
// critic's partition; required when src holds a critic), inside the same commit. Returns the new manifest.
using RangesOf = std::function<std::vector<FlatRange>(int rank)>;
Manifest reshard(const Checkpoint& src, int world_size, const RangesOf& ranges_of, const std::filesystem::path& out_dir,
                 const RangesOf& critic_ranges_of = nullptr);

}  // namespace zt::ckpt
