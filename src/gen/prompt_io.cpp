// Prompt lines in, completion text out (prompt_io.hpp).
#include "gen/prompt_io.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "tok/utf8.hpp"
#include "ztok/corpus.hpp"
#include "ztok/instruct_records.hpp"

namespace zt::gen {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw InputError(cat(where, ": ", what, " (a prompt line is {\"id\": ..., and one of \"prompt\": \"text\", "
                       "\"messages\": [{\"role\", \"content\"}, ...] or \"prompt_ids\": [ids]})"));
}

std::vector<std::int32_t> ids_of(const json& list, const std::string& where) {
  if (!list.is_array() || list.empty()) bad(where, "field `prompt_ids` must be a non-empty array of token ids");
  std::vector<std::int32_t> ids;
  for (const json& v : list) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > INT32_MAX)
      bad(where, cat("field `prompt_ids` holds ", v.dump(), ", not a token id"));
    ids.push_back(static_cast<std::int32_t>(v.get<std::int64_t>()));
  }
  return ids;
}

std::vector<std::int32_t> as_ids(const std::vector<std::uint32_t>& ids) { return {ids.begin(), ids.end()}; }

// The tokens of a text prompt as a Hugging Face tokenizer encodes it (tokenizer(text)): the tokenizer's
// BOS first where it has one (add_special_tokens), then the text, in which a special token's text is that
// token (a prompt rendered by hand, "<|im_start|>user\n...", reaches the model as its template would).
std::vector<std::int32_t> encode_text(const std::string& text, const tok::Tokenizer& t, tok::Encoder& encoder) {
  std::vector<std::uint32_t> ids;
  if (t.bos() != tok::Vocab::kNone) ids.push_back(t.bos());
  encoder.encode_with_specials(text, ids);
  return as_ids(ids);
}

// The chat template's special tokens the tokenizer has no id for, "" when it has them all (or there is
// no template or tokenizer: the lines say what they lack then).
std::string missing_specials(const PromptFormat& f) {
  std::string missing;
  if (f.tokenizer && f.chat_template)
    for (const std::string& name : ztok::template_specials(*f.chat_template))
      if (f.tokenizer->special_id(name) == tok::Vocab::kNone) missing += cat(missing.empty() ? "" : ", ", name);
  return missing;
}

// `missing`: missing_specials(f), found once for every line.
PromptLine parse_line(std::string_view text, const std::string& where, const PromptFormat& f, const std::string& missing,
                      tok::Encoder* encoder) {
  json record;
  try {
    record = json::parse(text);
  } catch (const json::exception& e) {
    bad(where, cat("not JSON (", e.what(), ")"));
  }
  if (!record.is_object()) bad(where, cat("a ", record.type_name(), ", not a JSON object"));
  PromptLine p;
  p.where = where;
  if (!record.contains("id")) bad(where, "field `id` is missing");
  p.id = record["id"];
  const int forms = static_cast<int>(record.contains("prompt")) + static_cast<int>(record.contains("messages")) +
                    static_cast<int>(record.contains("prompt_ids"));
  if (forms != 1) bad(where, forms == 0 ? "no prompt field" : "more than one prompt field");
  if (record.contains("prompt_ids")) {
    p.ids = ids_of(record["prompt_ids"], where);
  } else if (f.tokenizer == nullptr) {
    bad(where, cat("a text prompt needs a tokenizer: ", f.tokenizer_hint));
  } else if (record.contains("prompt")) {
    if (!record["prompt"].is_string()) bad(where, "field `prompt` must be a string");
    p.ids = encode_text(record["prompt"].get<std::string>(), *f.tokenizer, *encoder);
  } else {
    if (!f.chat_template)
      bad(where, cat("a messages prompt needs a chat template: ", f.template_hint));
    if (!missing.empty())
      throw InputError(cat(where, ": a messages line is rendered with the chat template ", ztok::to_string(*f.chat_template),
                           ", which writes the special tokens ", missing, ", and the tokenizer has no id for them: ",
                           f.specials_hint));
    const std::vector<ztok::ChatMessage> messages = ztok::parse_chat_messages(record["messages"], where);
    p.ids = as_ids(ztok::render_chat(*f.chat_template, messages, *f.tokenizer, *encoder, true).ids);
  }
  if (!f.answer_field.empty()) {
    const auto it = record.find(f.answer_field);
    if (it == record.end() || it->is_null())
      bad(where, cat("the reference answer field `", f.answer_field, "` (", f.answer_hint, ") is ",
                     it == record.end() ? "missing" : "null: give the answer the rewards score against"));
    p.reference = it->is_string() ? it->get<std::string>() : it->dump();
  }
  return p;
}

}  // namespace

std::vector<PromptLine> read_prompts(const std::string& glob, const PromptFormat& format) {
  std::vector<std::string> paths;
  try {
    paths = ztok::expand_inputs({glob});
  } catch (const InputError& e) {
    throw InputError(cat(format.source, "=", glob, ": ", e.what(), " (give the JSONL prompt file, or a glob of them)"));
  }
  std::unique_ptr<tok::Encoder> encoder = format.tokenizer ? std::make_unique<tok::Encoder>(*format.tokenizer) : nullptr;
  const std::string missing = missing_specials(format);
  std::vector<PromptLine> lines;
  for (const std::string& path : paths)
    ztok::for_each_line(path, [&](std::string_view line, std::uint64_t n) {
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
      lines.push_back(parse_line(line, cat(path, ":", n), format, missing, encoder.get()));
    });
  if (lines.empty()) throw InputError(cat(format.source, "=", glob, ": no prompt lines"));
  return lines;
}

std::optional<ztok::ChatTemplate> template_of_tokenizer(const tok::Tokenizer* t) {
  if (t == nullptr) return std::nullopt;
  for (const ztok::ChatTemplate c : {ztok::ChatTemplate::kChatml, ztok::ChatTemplate::kLlama3}) {
    const std::vector<std::string> names = ztok::template_specials(c);
    if (std::all_of(names.begin(), names.end(), [&](const std::string& n) { return t->special_id(n) != tok::Vocab::kNone; }))
      return c;
  }
  return std::nullopt;
}

ChatChoice chat_template_of(const tok::Tokenizer* t, const std::string& tokenizer_path) {
  if (t == nullptr) return {std::nullopt, "a messages line needs a tokenizer"};
  std::error_code ec;
  const std::filesystem::path from(tokenizer_path);
  const std::filesystem::path file =
      (std::filesystem::is_directory(from, ec) ? from : from.parent_path()) / "tokenizer_config.json";
  std::string jinja;
  if (!tokenizer_path.empty() && std::filesystem::exists(file, ec)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(std::ifstream(file));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(cat(file.string(), " is not valid JSON: ", e.what()));
    }
    const nlohmann::json* field = j.contains("chat_template") ? &j["chat_template"] : nullptr;
    if (field && field->is_string()) jinja = field->get<std::string>();
    if (field && field->is_array())  // named templates: the default one
      for (const nlohmann::json& named : *field)
        if (named.value("name", "") == "default" && named.contains("template") && named["template"].is_string())
          jinja = named["template"].get<std::string>();
  }
  if (jinja.empty()) {
    const std::optional<ztok::ChatTemplate> by_specials = template_of_tokenizer(t);
    return {by_specials, by_specials ? "" : "the tokenizer has the special tokens of no chat template ztrain renders "
                                            "(chatml, qwen2.5, qwen3, llama3, llama3.1, llama3.2)"};
  }
  const std::optional<ztok::ChatTemplate> chat = ztok::identify_chat_template(jinja);
  if (!chat)
    return {std::nullopt, cat(file.string(), "'s chat_template is none ztrain renders (Qwen2's, Qwen2.5's and Qwen3's "
                                             "ChatML, Llama 3's, 3.1's, 3.2's): ", ztok::unidentified_because(jinja),
                                             ", and rendering it another way would change the prompts: give prompt "
                                             "lines with the text rendered, or prompt_ids")};
  return {chat, "", true};
}

std::vector<std::int32_t> end_tokens(const tok::Tokenizer& t, const std::optional<ztok::ChatTemplate>& chat) {
  std::vector<std::int32_t> ids;
  if (t.eot() != tok::Vocab::kNone) ids.push_back(static_cast<std::int32_t>(t.eot()));
  if (!chat) return ids;
  const std::uint32_t end = t.special_id(ztok::turn_end_token(*chat));
  if (end != tok::Vocab::kNone) ids.push_back(static_cast<std::int32_t>(end));
  return ids;
}

namespace {
// The bytes of tokens [first, n) of the completion (ids past the tokenizer's, a model's padded rows, skipped).
std::string decoded(const Completion& c, const tok::Tokenizer& t, std::size_t n, std::size_t first = 0) {
  std::vector<std::uint32_t> ids;
  for (std::size_t i = first; i < n; ++i)
    if (static_cast<std::uint64_t>(c.tokens[i]) < t.n_ids()) ids.push_back(static_cast<std::uint32_t>(c.tokens[i]));
  return t.decode(ids);
}
}  // namespace

// Called after every new token, so only the tail that can hold a stop string ending in it is decoded (one
// ending earlier would have stopped the sequence then): the newest token whole, and before it the tokens
// that make at least the longest stop string's length less one byte, where such a string may begin. The
// newest token's own bytes do not count toward that reach: a long newest token would otherwise cut off a
// string that begins in the token before it (outside sweep 36 F7).
bool holds_stop_string(const Completion& c, const tok::Tokenizer& tokenizer, const std::vector<std::string>& stops) {
  if (stops.empty() || c.tokens.empty()) return false;
  std::size_t longest = 0;
  for (const std::string& s : stops) longest = std::max(longest, s.size());
  const std::size_t n = c.tokens.size();
  std::size_t first = n - 1;
  for (std::size_t before = 0; first > 0 && before + 1 < longest;)
    before += decoded(c, tokenizer, first, first - 1).size(), --first;
  const std::string text = decoded(c, tokenizer, n, first);
  return std::any_of(stops.begin(), stops.end(), [&](const std::string& s) { return text.find(s) != std::string::npos; });
}

std::string completion_text(const Completion& c, const tok::Tokenizer& tokenizer, const std::vector<std::string>& stops,
                            const std::vector<std::int32_t>& stop_tokens) {
  std::size_t n = c.tokens.size();
  if (n > 0 && c.finish == Finish::kStop &&
      std::find(stop_tokens.begin(), stop_tokens.end(), c.tokens.back()) != stop_tokens.end())
    --n;
  std::string text = decoded(c, tokenizer, n);
  std::size_t cut = text.size();
  for (const std::string& s : stops) cut = std::min(cut, text.find(s));
  text.resize(cut);
  std::string valid;
  tok::append_replacing_invalid(text, valid);
  return valid;
}

}  // namespace zt::gen
