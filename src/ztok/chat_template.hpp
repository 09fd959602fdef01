// Chat templates for instruction data (ztok --format instruct): messages rendered exactly as the
// models' own Jinja chat templates render them, tokenized with the template's special tokens as single
// ids, with the loss mask over what the model is trained to produce.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tok/tokenizer.hpp"

namespace zt::ztok {

enum class ChatTemplate {
  // Qwen2's ChatML: "<|im_start|>" role "\n" content "<|im_end|>" "\n" per message, and first the
  // system message "You are a helpful assistant." when the conversation does not open with one.
  kChatml,
  // Qwen2.5's: ChatML with the default system message "You are Qwen, created by Alibaba Cloud. You are a
  // helpful assistant."
  kQwen25,
  // Llama 3's: "<|begin_of_text|>", then "<|start_header_id|>" role "<|end_header_id|>" "\n\n"
  // content.strip() "<|eot_id|>" per message (Jinja's trim: Python's str.strip()).
  kLlama3,
  // Llama 3.1's (and 3.3's): Llama 3's, opened by a system turn that always comes: "Cutting Knowledge Date:
  // December 2023\nToday Date: 26 Jul 2024\n\n" and the conversation's system message (stripped), if any.
  kLlama31,
  // Llama 3.2's: 3.1's with today's date, as transformers renders it (strftime_now("%d %b %Y"), local
  // time, read once a process): the same prompt renders differently on another day.
  kLlama32,
  // Qwen3's: ChatML with no default system message; an assistant turn's reasoning (reasoning_content, or
  // its content's <think>...</think>) is dropped up to the last user turn and written as a thinking block
  // after it (the last message always gets one, empty without reasoning).
  kQwen3,
};

// "chatml", "qwen2.5", "qwen3", "llama3", "llama3.1" or "llama3.2"; anything else is a ConfigError listing them.
ChatTemplate parse_chat_template(const std::string& name);
std::string to_string(ChatTemplate t);

// Which of the templates above a model's Jinja chat_template (tokenizer_config.json's) renders as, from the
// text that tells them apart (the default system messages, the date block, Qwen3's thinking) and checks
// that it renders as that one (no other default system message, no system turn of its own, content trimmed
// as that one trims it, no errors raised); none for any other template (Mistral's [INST], a variant): ztrain
// does not run Jinja, so what it cannot render exactly it refuses.
std::optional<ChatTemplate> identify_chat_template(const std::string& jinja);
// Why identify_chat_template names none ("it resembles llama3's, but it writes a system turn of its own");
// empty when it names one.
std::string unidentified_because(const std::string& jinja);

struct ChatMessage {
  std::string role;     // system, user or assistant
  std::string content;  // plain text: a special token's text in it is ordinary text
  std::optional<std::string> reasoning;  // an assistant's reasoning_content (only Qwen3's template writes it)
  int weight = 1;  // an assistant's "weight" (OpenAI's fine-tuning format): 0 keeps it out of the loss mask
};

// The special tokens the template writes; each must have an id (tok::Tokenizer::special_id).
std::vector<std::string> template_specials(ChatTemplate t);
// Throws InputError naming the specials without an id and how to give them (--special NAME=ID).
void check_template_specials(ChatTemplate t, const tok::Tokenizer& tokenizer);

// One conversation as ids and its loss mask: 1 on every token of an assistant message's content and on
// its end token (<|im_end|> / <|eot_id|>) but for one of weight 0, 0 elsewhere (the template's headers,
// the other roles).
struct TokenizedSample {
  std::vector<std::uint32_t> ids;
  std::vector<std::uint8_t> loss_mask;
};

// Renders and tokenizes `messages` (valid UTF-8). Text between specials is encoded as one string, as a
// Hugging Face tokenizer encodes the rendered template; a token holding bytes of an assistant's content
// is trained on. The template's specials must have ids (check_template_specials).
// generation_prompt (transformers' add_generation_prompt, for generation): the assistant's header after the
// messages, where the model's reply starts.
TokenizedSample render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, const tok::Tokenizer& tokenizer,
                            tok::Encoder& encoder, bool generation_prompt = false);
// The special token that ends a turn: <|im_end|> (ChatML), <|eot_id|> (Llama 3); generation stops on it.
std::string turn_end_token(ChatTemplate t);

// Python's str.strip(): leading and trailing Unicode white space (str.isspace) removed.
std::string strip_unicode_space(const std::string& text);

}  // namespace zt::ztok
