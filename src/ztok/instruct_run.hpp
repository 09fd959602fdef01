// ztok --format instruct: instruction JSON Lines (instruct_records.hpp) rendered with a chat template
// (chat_template.hpp), optionally packed (sample_packing.hpp), written as instruction shards: the
// token shards plus `loss_mask`, `chat_template` and, packed, `window` (docs/INTERFACE.md "Shard schema").
// One process; the whole split is held in memory (5 bytes per token) until its shards are written, so
// it suits fine-tuning sets (a 100M-token set needs ~0.5 GB), not pre-training corpora.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ztok/chat_template.hpp"
#include "ztok/run.hpp"

namespace zt::ztok {

struct InstructOptions {
  ChatTemplate chat_template = ChatTemplate::kChatml;
  std::uint64_t pack_seq_len = 0;  // --pack --seq-len N: windows of N + 1 tokens; 0: not packed
};

struct InstructSummary {
  std::uint64_t records = 0, train_tokens = 0, valid_tokens = 0, train_shards = 0, valid_shards = 0;
  std::uint64_t masked_in_tokens = 0;  // loss_mask 1s, both splits
  std::uint64_t samples_cut = 0;       // longer than a window: continued in the next one
  std::uint64_t padding_tokens = 0;
  std::uint64_t replacements = 0;      // ill-formed UTF-8 and lone surrogate escapes, read as U+FFFD
};

// Does the job. Refuses (ConfigError) an --out that already holds shards; a bad record is an InputError
// naming file:line and the field. The output depends on the inputs and options only.
InstructSummary run_instruct(const ZtokOptions& options, const InstructOptions& instruct);

}  // namespace zt::ztok
