// JSON text for the lines ztrain writes by hand (metrics JSONL, --preflight's summary): numbers and
// string literals.
#include "io/json_text.hpp"

#include <cmath>
#include <cstdio>

#include "core/error.hpp"

namespace zt::io {

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

namespace {

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no surrogates, nothing
// past U+10FFFF), or 0 where the bytes there are not one.
std::size_t utf8_sequence(const std::string& s, std::size_t i) {
  const auto at = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned b0 = at(0);
  const std::size_t n = b0 < 0x80 ? 1 : b0 >= 0xC2 && b0 <= 0xDF ? 2 : b0 >= 0xE0 && b0 <= 0xEF ? 3
                                     : b0 >= 0xF0 && b0 <= 0xF4 ? 4 : 0;
  // The second byte's range narrows after E0, ED, F0 and F4; the others take 80..BF.
  const unsigned lo = b0 == 0xE0 ? 0xA0 : b0 == 0xF0 ? 0x90 : 0x80;
  const unsigned hi = b0 == 0xED ? 0x9F : b0 == 0xF4 ? 0x8F : 0xBF;
  for (std::size_t k = 1; k < n; ++k) {
    const unsigned b = at(k);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return 0;
  }
  return n;
}

}  // namespace

// A JSON string literal of s. Bytes that are not UTF-8 (a text sample may end inside a character, or
// an untrained model may emit a lone byte token) become U+FFFD, so every metrics line stays valid JSON.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
    } else if (c == '"' || c == '\\') {
      out += cat('\\', c);
      ++i;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out + "\"";
}

namespace {
// The code unit of a \uXXXX escape at json[at] ('\\'), or -1 when there is none.
long escape_at(const std::string& json, std::size_t at) {
  if (at + 6 > json.size() || json[at] != '\\' || json[at + 1] != 'u') return -1;
  long v = 0;
  for (std::size_t k = at + 2; k < at + 6; ++k) {
    const char c = json[k];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}
}  // namespace

std::size_t replace_lone_surrogate_escapes(std::string& json) {
  std::size_t replaced = 0;
  for (std::size_t i = 0; i < json.size(); ++i) {
    if (json[i] != '\\') continue;
    const long unit = escape_at(json, i);
    if (unit < 0xD800 || unit > 0xDFFF) {  // another escape (\\, \", \n, \u0041): skipped whole
      i += unit < 0 ? 1 : 5;
      continue;
    }
    const long next = unit <= 0xDBFF ? escape_at(json, i + 6) : -1;
    if (next >= 0xDC00 && next <= 0xDFFF) {  // a pair: kept
      i += 11;
      continue;
    }
    json.replace(i + 2, 4, "FFFD");
    ++replaced;
    i += 5;
  }
  return replaced;
}

}  // namespace zt::io
