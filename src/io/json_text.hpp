// JSON text for the lines ztrain writes by hand (the metrics JSONL, --preflight's summary line): a
// number and a string literal that every JSON reader accepts.
#pragma once

#include <string>

namespace zt::io {

// A float as JSON with 9 significant digits (non-finite values become null).
std::string json_number(double v);
// A string as a JSON string literal (quotes, backslashes and control characters escaped; bytes that are
// not UTF-8 become U+FFFD).
std::string json_string(const std::string& s);

// In JSON text read from users' files: each \uD800-\uDFFF escape that is not half of a surrogate pair (a
// truncated emoji in scraped text, which Python's json reads and a strict parser refuses) becomes
// \uFFFD, as tiktoken and Python's errors="replace" treat it. Returns how many were replaced.
std::size_t replace_lone_surrogate_escapes(std::string& json);

}  // namespace zt::io
