// Strict text-to-value parsing: the whole text must be the value ("3e-4x" is an error, not 3e-4).
#include "config/value.hpp"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <system_error>
#include <vector>

namespace zt::config::value {
namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// 64-bit parsing, then the range: "4294967298" is out of range for a layer count, never 2 layers.
template <typename T>
T parse_integer(std::string_view key, std::string_view raw, const char* what, T lo, T hi) {
  std::string_view text = trim(raw);
  const std::string range = cat("must be in [", lo, ", ", hi, "]");
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool negative_unsigned = std::is_unsigned_v<T> && !text.empty() && text.front() == '-';
  if (ec == std::errc::result_out_of_range) reject(key, raw, cat("out of range: ", range));
  if (negative_unsigned && text.size() > 1 && std::isdigit(static_cast<unsigned char>(text[1])))
    reject(key, raw, range);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) reject(key, raw, cat("not ", what));
  if (v < lo || v > hi) reject(key, raw, range);
  return v;
}
}  // namespace

std::int64_t parse_int(std::string_view key, std::string_view text, std::int64_t lo, std::int64_t hi) {
  return parse_integer<std::int64_t>(key, text, "an integer", lo, hi);
}

std::uint64_t parse_uint(std::string_view key, std::string_view text, std::uint64_t lo, std::uint64_t hi) {
  return parse_integer<std::uint64_t>(key, text, "a non-negative integer", lo, hi);
}

double parse_double(std::string_view key, std::string_view raw) {
  std::string_view text = trim(raw);
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range && end == text.data() + text.size())
    reject(key, raw, "out of range for a 64-bit float");
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) reject(key, raw, "not a number");
  if (!std::isfinite(v)) reject(key, raw, "not a finite number");
  return v;
}

bool parse_bool(std::string_view key, std::string_view raw) {
  std::string text(trim(raw));  // any case: True (Python), TRUE, yes, On
  for (char& ch : text) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  reject(key, raw, "not a boolean (true|false, yes|no, on|off, 1|0, in any case)");
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string format_double(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  ZT_CHECK(ec == std::errc());
  return std::string(buf, end);
}

std::string printable(std::string_view text) {
  if (text.empty()) return "''";
  constexpr std::size_t kShown = 200;
  std::string out;
  for (const char c : text.substr(0, kShown)) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    } else {
      out += c;
    }
  }
  if (text.size() > kShown) out += cat("... (", text.size(), " bytes)");
  return out;
}

}  // namespace zt::config::value
