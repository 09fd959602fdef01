// Cutting a split's shards out of the ranks' token journals (multi-rank ztok, ranks.hpp). Shard k
// holds the split's ids [k * shard_tokens, (k + 1) * shard_tokens) from whichever journals they lie
// in, the document starts among them and the names of the inputs they came from, in order: exactly
// what ShardStream writes when one process sees the whole split, so the files are byte-identical.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/shard.hpp"
#include "ztok/token_journal.hpp"

namespace zt::ztok {

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
