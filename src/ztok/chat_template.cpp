// Chat templates written out from their Jinja sources (the tokenizer_config.json chat_template of Qwen2
// and Qwen2.5 for ChatML, of Meta-Llama-3-8B-Instruct, Llama-3.1-8B-Instruct and Llama-3.2-1B-Instruct for
// Llama 3) as a list of parts: specials and text runs. Tools and tool calls are not rendered.
#include "ztok/chat_template.hpp"

#include <ctime>
#include <utility>

#include "core/error.hpp"

namespace zt::ztok {
namespace {

constexpr const char* kQwenDefaultSystem = "You are a helpful assistant.";
constexpr const char* kQwen25DefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
constexpr const char* kLlama31Date = "26 Jul 2024";  // Llama 3.1's date_string when none is given

// One piece of a rendered conversation: a special token, or text encoded as one string. `trained_from`
// is the byte offset in `text` where an assistant's content starts (npos: none of it is trained); a
// special with `trained` set is an assistant's end token.
struct Part {
  bool special = false;
  std::string text;
  std::size_t trained_from = std::string::npos;
  bool trained = false;
};

// An assistant message is trained on unless its "weight" is 0 (OpenAI's fine-tuning format).
bool trained(const ChatMessage& m) { return m.role == "assistant" && m.weight != 0; }

Part special(const char* name, bool trained = false) { return {true, name, std::string::npos, trained}; }
Part text(std::string t) { return {false, std::move(t), std::string::npos, false}; }
// Header text followed by a message's content; the content is trained for the assistant.
Part header_and_content(const std::string& header, const ChatMessage& m, const std::string& content) {
  Part p = text(header + content);
  if (trained(m)) p.trained_from = header.size();
  return p;
}

std::vector<Part> chatml_parts(const std::vector<ChatMessage>& messages, bool generation_prompt, const char* default_system) {
  std::vector<Part> parts;
  if (messages.empty() || messages.front().role != "system")
    parts.insert(parts.end(), {special("<|im_start|>"), text(cat("system\n", default_system)),
                               special("<|im_end|>"), text("\n")});
  for (const ChatMessage& m : messages) {
    parts.push_back(special("<|im_start|>"));
    parts.push_back(header_and_content(m.role + "\n", m, m.content));
    parts.push_back(special("<|im_end|>", trained(m)));
    parts.push_back(text("\n"));
  }
  if (generation_prompt) parts.insert(parts.end(), {special("<|im_start|>"), text("assistant\n")});
  return parts;
}

void add_llama3_turn(std::vector<Part>& parts, const ChatMessage& m) {
  parts.push_back(special("<|start_header_id|>"));
  parts.push_back(text(m.role));
  parts.push_back(special("<|end_header_id|>"));
  parts.push_back(header_and_content("\n\n", m, strip_unicode_space(m.content)));
  parts.push_back(special("<|eot_id|>", trained(m)));
}

// Llama 3.1/3.2: `date` non-empty opens with the system turn (the conversation's system message moved
// into it); empty: Llama 3's, every message its own turn.
std::vector<Part> llama3_parts(const std::vector<ChatMessage>& messages, bool generation_prompt, const std::string& date) {
  std::vector<Part> parts{special("<|begin_of_text|>")};
  std::size_t first = 0;
  if (!date.empty()) {
    const bool system = !messages.empty() && messages.front().role == "system";
    first = system ? 1 : 0;
    parts.insert(parts.end(), {special("<|start_header_id|>"), text("system"), special("<|end_header_id|>"),
                               text(cat("\n\nCutting Knowledge Date: December 2023\nToday Date: ", date, "\n\n",
                                        system ? strip_unicode_space(messages.front().content) : "")),
                               special("<|eot_id|>")});
  }
  for (std::size_t i = first; i < messages.size(); ++i) add_llama3_turn(parts, messages[i]);
  if (generation_prompt)
    parts.insert(parts.end(), {special("<|start_header_id|>"), text("assistant"), special("<|end_header_id|>"), text("\n\n")});
  return parts;
}

std::string lstrip_newlines(const std::string& s) { return s.substr(std::min(s.size(), s.find_first_not_of('\n'))); }
std::string rstrip_newlines(const std::string& s) {
  const std::size_t last = s.find_last_not_of('\n');
  return last == std::string::npos ? "" : s.substr(0, last + 1);
}

// Qwen3's last user query: its last user turn that is not a tool response.
std::size_t qwen3_last_query(const std::vector<ChatMessage>& messages) {
  const auto tool_response = [](const std::string& c) {
    return c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
  };
  for (std::size_t i = messages.size(); i-- > 0;)
    if (messages[i].role == "user" && !tool_response(messages[i].content)) return i;
  return messages.empty() ? 0 : messages.size() - 1;
}

// Qwen3's: its template's non-tool branch. An assistant turn's reasoning is its reasoning_content, else
// what its content holds between <think> and </think> (its content then what follows). Turns up to the last
// user query keep only their content; a later one with reasoning, and the last message, get a thinking
// block (empty without reasoning), which is the reply's and trained.
std::vector<Part> qwen3_parts(const std::vector<ChatMessage>& messages, bool generation_prompt) {
  const std::size_t last_query = qwen3_last_query(messages);
  std::vector<Part> parts;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string content = m.content;
    if (m.role == "assistant") {
      std::string reasoning = m.reasoning.value_or("");
      if (!m.reasoning && content.find("</think>") != std::string::npos) {
        reasoning = rstrip_newlines(content.substr(0, content.find("</think>")));
        if (const std::size_t open = reasoning.rfind("<think>"); open != std::string::npos) reasoning.erase(0, open + 7);
        reasoning = lstrip_newlines(reasoning);
        content = lstrip_newlines(content.substr(content.rfind("</think>") + 8));
      }
      if (i > last_query && (i + 1 == messages.size() || !reasoning.empty()))
        content = cat("<think>\n", lstrip_newlines(rstrip_newlines(reasoning)), "\n</think>\n\n", lstrip_newlines(content));
    }
    parts.push_back(special("<|im_start|>"));
    parts.push_back(header_and_content(m.role + "\n", m, content));
    parts.push_back(special("<|im_end|>", trained(m)));
    parts.push_back(text("\n"));
  }
  if (generation_prompt) parts.insert(parts.end(), {special("<|im_start|>"), text("assistant\n")});
  return parts;
}

// strftime_now("%d %b %Y") in the C locale, once a process.
const std::string& todays_date() {
  static const std::string date = [] {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[32];
    std::strftime(buf, sizeof buf, "%d %b %Y", &local);
    return std::string(buf);
  }();
  return date;
}

std::vector<Part> parts_of(ChatTemplate t, const std::vector<ChatMessage>& messages, bool generation_prompt) {
  switch (t) {
    case ChatTemplate::kChatml: return chatml_parts(messages, generation_prompt, kQwenDefaultSystem);
    case ChatTemplate::kQwen25: return chatml_parts(messages, generation_prompt, kQwen25DefaultSystem);
    case ChatTemplate::kLlama3: return llama3_parts(messages, generation_prompt, "");
    case ChatTemplate::kLlama31: return llama3_parts(messages, generation_prompt, kLlama31Date);
    case ChatTemplate::kLlama32: return llama3_parts(messages, generation_prompt, todays_date());
    case ChatTemplate::kQwen3: return qwen3_parts(messages, generation_prompt);
  }
  return {};
}

bool chatml(ChatTemplate t) { return t == ChatTemplate::kChatml || t == ChatTemplate::kQwen25 || t == ChatTemplate::kQwen3; }

constexpr std::pair<ChatTemplate, const char*> kNames[] = {{ChatTemplate::kChatml, "chatml"},
                                                           {ChatTemplate::kQwen25, "qwen2.5"},
                                                           {ChatTemplate::kQwen3, "qwen3"},
                                                           {ChatTemplate::kLlama3, "llama3"},
                                                           {ChatTemplate::kLlama31, "llama3.1"},
                                                           {ChatTemplate::kLlama32, "llama3.2"}};

// Decodes the code point at text[i] (valid UTF-8) and its length.
char32_t code_point_at(const std::string& s, std::size_t i, std::size_t& length) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  if (b(0) < 0x80) return length = 1, b(0);
  if (b(0) < 0xE0) return length = 2, ((b(0) & 0x1Fu) << 6) | (b(1) & 0x3Fu);
  if (b(0) < 0xF0) return length = 3, ((b(0) & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
  return length = 4, ((b(0) & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
}

// Python's str.isspace (the Unicode White_Space property plus U+001C..U+001F).
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

ChatTemplate parse_chat_template(const std::string& name) {
  for (const auto& [t, n] : kNames)
    if (name == n) return t;
  throw ConfigError(cat("--chat-template must be chatml (Qwen2's ChatML), qwen2.5, qwen3, llama3 (Llama 3's), "
                        "llama3.1 (3.1's and 3.3's) or llama3.2 (3.2's, today's date), not '", name, "'"));
}

std::string to_string(ChatTemplate t) {
  for (const auto& [k, n] : kNames)
    if (t == k) return n;
  return "?";
}

namespace {

// The template a Jinja text resembles, and, when its text says it renders otherwise than that template's
// renderer, what differs. The phrases name the family (ChatML's <|im_start|>, Llama 3's headers) and the
// member (the default system messages, the date block, Qwen3's thinking); the checks refuse what the
// sweeps found taken for a family member while rendering otherwise: a default system message of another
// text, a system turn a Llama 3 template writes itself, content not trimmed where Llama's trims it (or
// trimmed where ChatML's keeps it), a template that raises (refuses conversations ours render).
struct Resemblance {
  std::optional<ChatTemplate> chat;
  std::string differs;  // empty: it renders as `chat`
};

// Every "<|im_end|>" of a ChatML template followed by a line break (written '\n', or as a literal one,
// directly or as the next concatenated string: the blanks, quotes and +'s between are skipped): ChatML's
// turns end "<|im_end|>\n".
bool turns_end_with_newline(const std::string& jinja) {
  const std::string end = "<|im_end|>";
  for (std::size_t at = jinja.find(end); at != std::string::npos; at = jinja.find(end, at + 1)) {
    const std::size_t next = jinja.find_first_not_of(" '\"+", at + end.size());
    if (next == std::string::npos || !(jinja[next] == '\n' || jinja.compare(next, 2, "\\n") == 0)) return false;
  }
  return true;
}

Resemblance resemble(const std::string& jinja) {
  const auto has = [&](std::string_view s) { return jinja.find(s) != std::string::npos; };
  // A template that adds messages of its own (a default system turn put into the list) renders turns ours
  // does not; 3.1's and Qwen3's own only take the system message out of the list ("messages[1:]").
  const bool adds_messages = has("] + messages") || has("]+messages") || has("messages + [") || has("messages+[");
  if (has("<|im_start|>")) {
    if (adds_messages) return {ChatTemplate::kChatml, "it adds messages of its own to the conversation"};
    if (!turns_end_with_newline(jinja)) return {ChatTemplate::kChatml, "its turns do not end with <|im_end|> and a line break"};
    if (has("<think>")) {  // Qwen3's: its thinking blocks and the last user query it finds
      if (!has("last_query_index") || !has("</think>")) return {};
      return {ChatTemplate::kQwen3, has("raise_exception") ? "it raises errors (Qwen3's does not)" : ""};
    }
    const std::string qwen25 = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
    const ChatTemplate t = has(qwen25) ? ChatTemplate::kQwen25 : ChatTemplate::kChatml;
    const std::string system = t == ChatTemplate::kQwen25 ? qwen25 : "You are a helpful assistant.";
    if (!has(system)) return {};
    if (!has(system + "<|im_end|>")) return {t, "its default system message is another text"};
    if (has("raise_exception")) return {t, "it raises errors on some conversations (Qwen2's and Qwen2.5's do not)"};
    if (has("trim") || has("strip(")) return {t, "it trims the messages' content (Qwen2's and Qwen2.5's keep it whole)"};
    return {t, ""};
  }
  if (!has("<|start_header_id|>") || !has("<|eot_id|>")) return {};
  if (adds_messages) return {ChatTemplate::kLlama3, "it adds messages of its own to the conversation"};
  if (!has("<|start_header_id|>assistant<|end_header_id|>"))
    return {ChatTemplate::kLlama3, "its generation prompt is not the assistant's header"};
  if (!has("Cutting Knowledge Date: December 2023")) {  // Llama 3's: each message's role, nothing of its own
    if (!has("trim")) return {ChatTemplate::kLlama3, "it does not trim the messages' content (Llama 3's does)"};
    if (has("system<|end_header_id|>")) return {ChatTemplate::kLlama3, "it writes a system turn of its own (Llama 3's does not)"};
    if (has("raise_exception")) return {ChatTemplate::kLlama3, "it raises errors on some conversations (Llama 3's does not)"};
    return {ChatTemplate::kLlama3, ""};
  }
  const ChatTemplate t = has("strftime_now") ? ChatTemplate::kLlama32 : ChatTemplate::kLlama31;
  if (t == ChatTemplate::kLlama31 && !has("\"26 Jul 2024\"")) return {t, "its date is not Llama 3.1's (26 Jul 2024)"};
  if (!has("trim")) return {t, "it does not trim the messages' content (Llama 3.1's and 3.2's do)"};
  return {t, ""};
}

}  // namespace

std::optional<ChatTemplate> identify_chat_template(const std::string& jinja) {
  const Resemblance r = resemble(jinja);
  return r.differs.empty() ? r.chat : std::nullopt;
}

std::string unidentified_because(const std::string& jinja) {
  const Resemblance r = resemble(jinja);
  if (!r.chat) return "it is none of them";
  if (r.differs.empty()) return "";
  return cat("it resembles ", to_string(*r.chat), "'s, but ", r.differs);
}

std::string turn_end_token(ChatTemplate t) { return chatml(t) ? "<|im_end|>" : "<|eot_id|>"; }

std::vector<std::string> template_specials(ChatTemplate t) {
  if (chatml(t)) return {"<|im_start|>", "<|im_end|>"};
  return {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
}

void check_template_specials(ChatTemplate t, const tok::Tokenizer& tokenizer) {
  std::string missing, example;
  for (const std::string& name : template_specials(t))
    if (tokenizer.special_id(name) == tok::Vocab::kNone) {
      missing += cat(missing.empty() ? "" : ", ", name);
      example += cat(" --special '", name, "=ID'");
    }
  if (!missing.empty())
    throw InputError(cat("--chat-template ", to_string(t), " writes the special tokens ", missing,
                         ", which the vocabulary does not define: give each its id with", example,
                         " (ids from the model's tokenizer, e.g. its tokenizer.json added_tokens; above the ",
                         tokenizer.vocab().size(), " ordinary ids, and model.vocab_size must cover them)"));
}

TokenizedSample render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, const tok::Tokenizer& tokenizer,
                            tok::Encoder& encoder, bool generation_prompt) {
  TokenizedSample out;
  for (const Part& p : parts_of(t, messages, generation_prompt)) {
    if (p.special) {
      const std::uint32_t id = tokenizer.special_id(p.text);
      ZT_CHECK(id != tok::Vocab::kNone, "special token ", p.text, " has no id (check_template_specials)");
      out.ids.push_back(id);
      out.loss_mask.push_back(p.trained ? 1 : 0);
      continue;
    }
    // As the tokenizer encodes any text (its added tokens, NFC, pre-tokenizer): an id that holds bytes of
    // an assistant's content is trained.
    encoder.encode_valid_marking(p.text, p.trained_from == std::string::npos ? p.text.size() : p.trained_from,
                                 out.ids, out.loss_mask);
  }
  return out;
}

std::string strip_unicode_space(const std::string& text) {
  std::size_t begin = 0, end = text.size(), length = 0;
  while (begin < end && is_python_space(code_point_at(text, begin, length))) begin += length;
  while (end > begin) {
    std::size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    if (!is_python_space(code_point_at(text, start, length))) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

}  // namespace zt::ztok
