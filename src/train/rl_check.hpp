// RL's inputs as a start-up check (ztrain runs it instead of check_data when rl.prompts is set): the batch
// layout over the data-parallel ranks, the tokenizer, and every prompt line, each fitting the context
// with room for a response; refused before any work (exit 2), naming the key, file and line.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "gen/prompt_io.hpp"
#include "tok/tokenizer.hpp"

namespace zt::train {

// The tokenizer RL reads prompts and scores responses with: data.vocab, else init.from's tokenizer.json.
const tok::Tokenizer& rl_tokenizer(const config::Config& c);

// rl.prompts read with that tokenizer (and its chat template, for messages lines), each with its reference.
std::vector<gen::PromptLine> read_rl_prompts(const config::Config& c, const tok::Tokenizer& tokenizer);

// The longest sequence RL generates: the longest prompt + rl.max_new_tokens, at most model.seq_len; a
// prompt leaving no room for one new token is refused.
std::int64_t rl_max_len(const config::Config& c, const std::vector<gen::PromptLine>& prompts);

void check_rl_inputs(const config::Config& c, std::int64_t dp_size);

}  // namespace zt::train
