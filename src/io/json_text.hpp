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

}  // namespace zt::io
