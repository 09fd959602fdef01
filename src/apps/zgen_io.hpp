// zgen's input and output lines (docs/INTERFACE.md "zgen"). Input: JSON Lines, each an object with an
// "id" (any JSON value, echoed) and one of
//   "prompt": "text"                          encoded with the tokenizer (its BOS first where it has one),
//   "messages": [{"role", "content"}, ...]    rendered by the chat template with the assistant's header,
//   "prompt_ids": [ids]                       used as given (pre-tokenized work, RL);
// and, for an evaluation, the reference answer in another field. Output: one JSON line per sample,
//   {"id", ["sample",] "text", "token_ids", "logprobs", "finish_reason"[, "answer", "reference", "score"]}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gen/answers.hpp"
#include "gen/engine.hpp"
#include "tok/tokenizer.hpp"
#include "ztok/chat_template.hpp"

namespace zt::apps {

using gen::Completion;

struct PromptLine {
  nlohmann::json id;
  std::vector<std::int32_t> ids;
  std::optional<std::string> reference;  // the answer field's text, when an evaluation reads one
  std::string where;                     // "FILE:LINE"
};

struct PromptFormat {
  const tok::Tokenizer* tokenizer = nullptr;           // null: only prompt_ids lines
  std::optional<ztok::ChatTemplate> chat_template;     // null: messages lines are refused
  std::string answer_field;                            // "": no reference read
};

// Every non-blank line of `path` (.gz/.zst too). A bad line (not an object, no id, none or two of the
// prompt fields, a text prompt without a tokenizer, a missing reference) is an InputError naming
// FILE:LINE and the field.
std::vector<PromptLine> read_prompts(const std::string& path, const PromptFormat& format);

// The completion's text: its tokens decoded (the stop token of a kStop finish left out, as vLLM's and
// OpenAI's outputs leave it out), cut before the first stop string it holds. Invalid UTF-8 at the end
// of a cut is replaced, so the text is always valid JSON.
std::string completion_text(const Completion& c, const tok::Tokenizer& tokenizer, const std::vector<std::string>& stops,
                            const std::vector<std::int32_t>& stop_tokens);

// Whether the decoded tokens so far hold one of the stop strings (the engine's stop rule, after each token:
// it decodes only the tail a stop string ending in the newest token can cover).
bool holds_stop_string(const Completion& c, const tok::Tokenizer& tokenizer, const std::vector<std::string>& stops);

struct Scored {
  std::optional<std::string> answer;  // what the rule took from the text
  double score = 0;
};

// One output line (no trailing newline). sample < 0: no "sample" field (one sample per prompt).
std::string output_line(const PromptLine& p, int sample, const Completion& c, const std::optional<std::string>& text,
                        const Scored* scored);

}  // namespace zt::apps
