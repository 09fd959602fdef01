// Cutting a split's shards out of the ranks' token journals (job.hpp). Shard k holds the split's ids
// [k * shard_tokens, (k + 1) * shard_tokens) from whichever journals they lie in, the document starts
// among them and the names of the inputs they came from, in order, so the files do not depend on how
// the inputs were shared among ranks (nor on when a shard was cut).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/shard.hpp"
#include "ztok/token_journal.hpp"

namespace zt::ztok {

// "train", 3 -> "train_000003.h5": a split's shard file names, in token order as bytes.
std::string shard_file_name(const std::string& prefix, std::uint64_t index);

// One rank's journal of a split and where it sits in the split's token stream.
struct JournalPart {
  std::filesystem::path stem;
  JournalCounts counts;
  std::uint64_t first = 0;  // position of its first id in the split: the ids of all lower ranks
};

// Shards a split of `split_tokens` ids is cut into (only the last may be short; none when empty).
std::uint64_t shard_count(std::uint64_t split_tokens, std::uint64_t shard_tokens);

// Writes shard `index` of the split made of `parts` (in rank order) atomically to `path`.
// `inputs` names the journals' input indices (the shard's `sources`).
void assemble_shard(const std::filesystem::path& path, const data::TokenizerInfo& tokenizer, std::uint64_t shard_tokens,
                    std::uint64_t index, const std::vector<JournalPart>& parts, const std::vector<std::string>& inputs);

}  // namespace zt::ztok
