// Prompt lines in and completion text out, for everything that generates (zgen, RL's rollouts; docs/INTERFACE.md
// "zgen" and "RL"). Input: JSON Lines, each an object with an "id" (any JSON value, echoed) and one of
//   "prompt": "text"                          encoded with the tokenizer (its BOS first where it has one),
//   "messages": [{"role", "content"}, ...]    rendered by the chat template with the assistant's header,
//   "prompt_ids": [ids]                       used as given (pre-tokenized work, RL);
// and, for an evaluation or RL, the reference answer in another field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gen/engine.hpp"
#include "tok/tokenizer.hpp"
#include "ztok/chat_template.hpp"

namespace zt::gen {

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
  // How the program's user gives what a line needs, for the errors: a tokenizer, a chat template, the
  // answer field's name (zgen's flags by default; RL names its keys).
  std::string tokenizer_hint = "give zgen --tokenizer PATH (or prompt_ids)";
  std::string template_hint = "give zgen --chat-template chatml|qwen2.5|qwen3|llama3|llama3.1|llama3.2";
  // For a messages line whose template writes special tokens the tokenizer does not define.
  std::string specials_hint = "give each its id with zgen --special NAME=ID (the model's ids, e.g. from its "
                              "tokenizer.json added_tokens), or give prompt or prompt_ids lines";
  std::string answer_hint = "--answer-field";
  std::string source = "--prompts";  // what names the files, for the error when none is there
};

// Every non-blank line of the files `glob` names (a path or a glob, each glob's matches in byte order;
// .gz/.zst too). No such file is an InputError naming format.source; a bad line (not an object, no id,
// none or two of the prompt fields, a text prompt without a tokenizer, a messages line without a chat
// template or with one whose special tokens the tokenizer lacks, a missing or null reference) is one
// naming FILE:LINE and the field. Only messages lines need the template: prompt and prompt_ids lines
// read whatever the tokenizer lacks of it.
std::vector<PromptLine> read_prompts(const std::string& glob, const PromptFormat& format);

// The chat template whose special tokens the tokenizer has (chatml, then llama3); none without a tokenizer.
std::optional<ztok::ChatTemplate> template_of_tokenizer(const tok::Tokenizer* t);

// The chat template messages lines render with, for the tokenizer read from `tokenizer_path` (a
// tokenizer.json or a directory): the model's own, tokenizer_config.json's chat_template beside it as
// ztok::identify_chat_template names it (Qwen2.5's default system message, Llama 3.1's date block), else,
// without that file or field, template_of_tokenizer's. A model template that is none ztrain renders gives
// none and `why_none` says so, naming the file: a messages line is then refused, never rendered another way.
struct ChatChoice {
  std::optional<ztok::ChatTemplate> chat;
  std::string why_none;     // for PromptFormat::template_hint
  bool model_template = false;  // named by tokenizer_config.json (not guessed from the specials)
};
ChatChoice chat_template_of(const tok::Tokenizer* t, const std::string& tokenizer_path);

// The tokens that end a response: the tokenizer's end of text and, with a chat template, its end of turn
// (those the tokenizer has).
std::vector<std::int32_t> end_tokens(const tok::Tokenizer& tokenizer, const std::optional<ztok::ChatTemplate>& chat);

// The completion's text: its tokens decoded (the stop token of a kStop finish left out, as vLLM's and
// OpenAI's outputs leave it out), cut before the first stop string it holds. Invalid UTF-8 at the end
// of a cut is replaced, so the text is always valid JSON.
std::string completion_text(const Completion& c, const tok::Tokenizer& tokenizer, const std::vector<std::string>& stops,
                            const std::vector<std::int32_t>& stop_tokens);

// Whether the decoded tokens so far hold one of the stop strings (the engine's stop rule, after each token:
// it decodes only the tail a stop string ending in the newest token can cover).
bool holds_stop_string(const Completion& c, const tok::Tokenizer& tokenizer, const std::vector<std::string>& stops);

}  // namespace zt::gen
