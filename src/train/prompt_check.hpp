// The prompt sets the trainer generates from, RL's (rl.prompts) and the answer evaluation's
// (log.eval_prompts): their tokenizer, their lines, and their start-up checks (ztrain runs the RL one
// instead of check_data): refused before any work (exit 2) naming the key, file and line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "gen/prompt_io.hpp"
#include "plan/memory_plan.hpp"
#include "tok/tokenizer.hpp"

namespace zt::train {

// A run's tokenizer file: data.vocab, else init.from's tokenizer.json; "" without either (zgen reads a
// checkpoint's run by it).
std::string run_tokenizer_path(const config::Config& c);

// The tokenizer prompts are read and responses scored with: data.vocab, else init.from's tokenizer.json.
// `key` names what needs it in the error (rl.reward, log.eval_prompts).
const tok::Tokenizer& text_tokenizer(const config::Config& c, const std::string& key);

// RL's prompt set (rl.prompts, rl.answer_field) or the answer evaluation's (log.eval_prompts,
// log.eval_answer_field).
enum class PromptSet { kRl, kEvaluation };

// The set's prompt lines with text_tokenizer's tokenizer and, for messages lines, the model's chat
// template (gen::chat_template_of: tokenizer_config.json's beside the tokenizer), each with its reference.
// Read once a process (the files are inputs of the run, not changed under it): later calls return the
// same lines.
const std::vector<gen::PromptLine>& read_answer_prompts(const config::Config& c, PromptSet set);

// The longest sequence generated: the longest prompt + max_new, at most model.seq_len; a prompt leaving
// no room for one new token is refused, naming its line and `key` (the prompts' key).
std::int64_t max_sequence_len(const config::Config& c, const std::vector<gen::PromptLine>& prompts, std::int64_t max_new,
                              const std::string& key);

// Without the model's own template (no tokenizer_config.json beside the tokenizer: `chat` not
// model_template), the template the run's instruction data (data.train) was rendered with, its shards'
// chat_template (ztok --chat-template), before a guess from the tokenizer's specials: an evaluation of a
// fine-tune (ztrain's, or zgen's on its checkpoint) asks as its training data did.
gen::ChatChoice training_data_template(const config::Config& c, gen::ChatChoice chat);

// The longest prompt's tokens: the generation engines prefill prompts whole, in chunks of it.
std::int64_t longest_prompt(const std::vector<gen::PromptLine>& prompts);

// RL's start-up check: the batch layout over the data-parallel ranks, the tokenizer, every prompt line.
void check_rl_inputs(const config::Config& c, std::int64_t dp_size);

// The sequence lengths the generation engines will have, for the memory plan (RL's rollouts, the answer
// evaluation's): each prompt set's longest prompt + its new tokens where the set and its tokenizer can be
// read here, else 0 (model.seq_len bounds them: --plan where the prompts or the model's tokenizer are
// not). A set that cannot be read is left to the start-up checks, which name the file and line.
plan::GenerationLengths known_generation_lengths(const config::Config& c);

}  // namespace zt::train
