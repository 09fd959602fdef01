// Chat templates written out from their Jinja sources (Qwen2's tokenizer_config.json chat_template for
// ChatML, Meta-Llama-3-8B-Instruct's for Llama 3) as a list of parts: specials and text runs.
#include "ztok/chat_template.hpp"

#include "core/error.hpp"

namespace zt::ztok {
namespace {

constexpr const char* kQwenDefaultSystem = "You are a helpful assistant.";

// One piece of a rendered conversation: a special token, or text encoded as one string. `trained_from`
// is the byte offset in `text` where an assistant's content starts (npos: none of it is trained); a
// special with `trained` set is an assistant's end token.
struct Part {
  bool special = false;
  std::string text;
  std::size_t trained_from = std::string::npos;
  bool trained = false;
};

Part special(const char* name, bool trained = false) { return {true, name, std::string::npos, trained}; }
Part text(std::string t) { return {false, std::move(t), std::string::npos, false}; }
// Header text followed by a message's content; the content is trained for the assistant.
Part header_and_content(const std::string& header, const ChatMessage& m, const std::string& content) {
  Part p = text(header + content);
  if (m.role == "assistant") p.trained_from = header.size();
  return p;
}

std::vector<Part> chatml_parts(const std::vector<ChatMessage>& messages, bool generation_prompt) {
  std::vector<Part> parts;
  if (messages.empty() || messages.front().role != "system")
    parts.insert(parts.end(), {special("<|im_start|>"), text(cat("system\n", kQwenDefaultSystem)),
                               special("<|im_end|>"), text("\n")});
  for (const ChatMessage& m : messages) {
    parts.push_back(special("<|im_start|>"));
    parts.push_back(header_and_content(m.role + "\n", m, m.content));
    parts.push_back(special("<|im_end|>", m.role == "assistant"));
    parts.push_back(text("\n"));
  }
  if (generation_prompt) parts.insert(parts.end(), {special("<|im_start|>"), text("assistant\n")});
  return parts;
}

std::vector<Part> llama3_parts(const std::vector<ChatMessage>& messages, bool generation_prompt) {
  std::vector<Part> parts{special("<|begin_of_text|>")};
  for (const ChatMessage& m : messages) {
    parts.push_back(special("<|start_header_id|>"));
    parts.push_back(text(m.role));
    parts.push_back(special("<|end_header_id|>"));
    parts.push_back(header_and_content("\n\n", m, strip_unicode_space(m.content)));
    parts.push_back(special("<|eot_id|>", m.role == "assistant"));
  }
  if (generation_prompt)
    parts.insert(parts.end(), {special("<|start_header_id|>"), text("assistant"), special("<|end_header_id|>"), text("\n\n")});
  return parts;
}

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
  if (name == "chatml") return ChatTemplate::kChatml;
  if (name == "llama3") return ChatTemplate::kLlama3;
  throw ConfigError(cat("--chat-template must be chatml (Qwen2's ChatML) or llama3 (Llama 3's), not '", name, "'"));
}

std::string to_string(ChatTemplate t) { return t == ChatTemplate::kChatml ? "chatml" : "llama3"; }

std::string turn_end_token(ChatTemplate t) { return t == ChatTemplate::kChatml ? "<|im_end|>" : "<|eot_id|>"; }

std::vector<std::string> template_specials(ChatTemplate t) {
  if (t == ChatTemplate::kChatml) return {"<|im_start|>", "<|im_end|>"};
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
  const tok::PreTokenizer& pre = tokenizer.pretokenizer();
  for (const Part& p : t == ChatTemplate::kChatml ? chatml_parts(messages, generation_prompt)
                                                  : llama3_parts(messages, generation_prompt)) {
    if (p.special) {
      const std::uint32_t id = tokenizer.special_id(p.text);
      ZT_CHECK(id != tok::Vocab::kNone, "special token ", p.text, " has no id (check_template_specials)");
      out.ids.push_back(id);
      out.loss_mask.push_back(p.trained ? 1 : 0);
      continue;
    }
    // Piece by piece (the pre-tokenizer's cuts, which no token crosses), so each token's bytes are known.
    for (std::size_t pos = 0; pos < p.text.size();) {
      const std::size_t end = pre.piece_end(p.text, pos);
      encoder.encode_piece(std::string_view(p.text).substr(pos, end - pos), out.ids);
      const bool trained = p.trained_from != std::string::npos && end > p.trained_from;
      out.loss_mask.resize(out.ids.size(), trained ? 1 : 0);
      pos = end;
    }
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
