// Instruction data as JSON Lines: each non-blank line one conversation, either
//   {"prompt": "...", "response": "..."}                  a user turn and the assistant's answer, or
//   {"messages": [{"role": "system|user|assistant", "content": "..."}, ...]}
// with at least one assistant message (what the model is trained to produce).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ztok/chat_template.hpp"

namespace zt::ztok {

// The conversation of one line; `where` is "FILE:LINE". A bad record (not JSON, a missing or mistyped
// field, an unknown role, no assistant message) is an InputError naming `where` and the field.
std::vector<ChatMessage> parse_instruct_record(std::string_view line, const std::string& where);

// A "messages" array ([{"role": "system|user|assistant", "content": "..."}, ...], not empty) of the
// record at `where`; InputError naming the field otherwise (zgen's chat prompts read it too).
std::vector<ChatMessage> parse_chat_messages(const nlohmann::json& list, const std::string& where);

// Calls f(line, line_number) for each line of `path` (1-based; a final line without '\n' too);
// .gz and .zst are decompressed (io/input_stream.hpp).
void for_each_line(const std::string& path, const std::function<void(std::string_view, std::uint64_t)>& f);

}  // namespace zt::ztok
