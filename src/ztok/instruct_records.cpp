// Parsing instruction JSONL records (nlohmann::json) into chat messages, with errors that name the
// file, the line and the field.
#include "ztok/instruct_records.hpp"

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "io/input_stream.hpp"

namespace zt::ztok {
namespace {

// "an array", "a string": nlohmann's type names with their article.
std::string with_article(const std::string& type) {
  return cat(type.find_first_of("aeiou") == 0 ? "an " : "a ", type);
}

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& field, const std::string& what) {
  throw InputError(cat(where, ": field `", field, "` ", what,
                       " (an instruction record is {\"prompt\", \"response\"} or {\"messages\": [{\"role\", \"content\"}, ...]})"));
}

std::string string_field(const json& object, const char* name, const std::string& field, const std::string& where) {
  const auto it = object.find(name);
  if (it == object.end()) bad(where, field, "is missing");
  if (!it->is_string()) bad(where, field, cat("must be a string, not ", it->type_name()));
  return it->get<std::string>();
}

}  // namespace

std::vector<ChatMessage> parse_chat_messages(const json& list, const std::string& where) {
  if (!list.is_array()) bad(where, "messages", cat("must be an array, not ", list.type_name()));
  if (list.empty()) bad(where, "messages", "is empty");
  std::vector<ChatMessage> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string field = cat("messages[", i, "]");
    if (!list[i].is_object()) bad(where, field, cat("must be an object, not ", list[i].type_name()));
    ChatMessage m{string_field(list[i], "role", field + ".role", where),
                  string_field(list[i], "content", field + ".content", where)};
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      bad(where, field + ".role", cat("is '", m.role, "': it must be system, user or assistant"));
    if (list[i].contains("tool_calls") && !list[i]["tool_calls"].is_null() &&
        !(list[i]["tool_calls"].is_array() && list[i]["tool_calls"].empty()))
      bad(where, field + ".tool_calls", "is given: ztrain's templates do not render tool calls (a turn of them would be "
                                        "trained as an empty reply); drop the record, or render it yourself as prompt_ids");
    if (const auto w = list[i].find("weight"); w != list[i].end()) {
      // Compared as the JSON number, never narrowed first (4294967296 read as int was 0).
      const bool zero = *w == 0, one = *w == 1;
      if (!w->is_number_integer() || !(zero || one))
        bad(where, field + ".weight", cat("is ", w->dump(), ": it must be 0 (not trained) or 1"));
      if (m.role != "assistant") bad(where, field + ".weight", "is given on a " + m.role + " message: only assistant messages are trained");
      m.weight = one ? 1 : 0;
    }
    if (const auto r = list[i].find("reasoning_content"); r != list[i].end() && !r->is_null()) {
      if (!r->is_string()) bad(where, field + ".reasoning_content", cat("must be a string or null, not ", r->type_name()));
      m.reasoning = r->get<std::string>();
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<ChatMessage> parse_instruct_record(std::string_view line, const std::string& where) {
  json record;
  try {
    record = json::parse(line);
  } catch (const json::exception& e) {
    throw InputError(cat(where, ": not a JSON object (", e.what(), ")"));
  }
  if (!record.is_object()) throw InputError(cat(where, ": ", with_article(record.type_name()), ", not a JSON object"));
  if (record.contains("tools") && !record["tools"].is_null() && !(record["tools"].is_array() && record["tools"].empty()))
    bad(where, "tools", "is given: ztrain's templates do not render tool definitions; drop the record's tools (and tool "
                        "calls), or render the conversation yourself");
  const bool chat = record.contains("messages"), pair = record.contains("prompt") || record.contains("response");
  if (chat && pair) bad(where, "messages", "comes with prompt/response: give one form or the other");
  std::vector<ChatMessage> messages;
  if (chat) {
    messages = parse_chat_messages(record["messages"], where);
  } else {
    messages.push_back({"user", string_field(record, "prompt", "prompt", where)});
    messages.push_back({"assistant", string_field(record, "response", "response", where)});
  }
  for (const ChatMessage& m : messages)
    if (m.role == "assistant" && m.weight != 0) return messages;
  bad(where, "messages", "has no assistant message (of weight 1): nothing to train on");
}

void for_each_line(const std::string& path, const std::function<void(std::string_view, std::uint64_t)>& f) {
  const std::unique_ptr<io::InputStream> in = io::InputStream::open(path);
  std::string pending;
  std::vector<char> buffer(1 << 16);
  std::uint64_t line = 0;
  try {
    for (std::size_t n; (n = in->read(buffer.data(), buffer.size())) > 0;) {
      pending.append(buffer.data(), n);
      std::size_t start = 0;
      for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
        f(std::string_view(pending).substr(start, nl - start), ++line);
      pending.erase(0, start);
    }
    if (!pending.empty()) f(pending, ++line);
  } catch (const InputError&) {  // a bad record of a damaged .gz/.zst: the damage is what is said
    io::read_to_end(*in);
    throw;
  }
}

}  // namespace zt::ztok
