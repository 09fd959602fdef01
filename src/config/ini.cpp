// ztrain's INI grammar (ini.hpp).
#include "config/ini.hpp"

#include "config/value.hpp"

#include "core/error.hpp"

namespace zt::config::ini {
namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string trimmed(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && blank(s[a])) ++a;
  while (b > a && blank(s[b - 1])) --b;
  return s.substr(a, b - a);
}

// The part of `text` before a comment: a `#` at its start or after a blank.
std::string before_comment(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i)
    if (text[i] == '#' && (i == 0 || blank(text[i - 1]))) return text.substr(0, i);
  return text;
}

[[noreturn]] void refuse_line(const std::string& line, int number, const std::string& where, const std::string& why) {
  throw ConfigError(cat("line ", number, " '", value::printable(line), "'", where, ": ", why));
}

// A value that starts with a quote: its text up to the closing quote (escapes resolved); only blanks or a
// comment may follow.
std::string unquote(const std::string& value, const std::string& line, int number, const std::string& where) {
  std::string out;
  std::size_t i = 1;
  for (; i < value.size() && value[i] != '"'; ++i) {
    if (value[i] != '\\') {
      out += value[i];
      continue;
    }
    if (++i == value.size()) break;
    const char e = value[i];
    if (e != '"' && e != '\\' && e != 'n')
      refuse_line(line, number, where, cat("'\\", e, "' is no escape: a quoted value takes \\\" \\\\ and \\n"));
    out += e == 'n' ? '\n' : e;
  }
  if (i >= value.size()) refuse_line(line, number, where, "the quoted value has no closing '\"'");
  if (!trimmed(before_comment(value.substr(i + 1))).empty())
    refuse_line(line, number, where, "text after the quoted value's closing '\"' (a comment starts with ' #')");
  return out;
}

}  // namespace

std::vector<Entry> read(std::istream& in, const std::string& where) {
  std::vector<Entry> out;
  std::string section, raw;
  for (int number = 1; std::getline(in, raw); ++number) {
    if (number == 1 && raw.starts_with("\xEF\xBB\xBF")) raw.erase(0, 3);  // a UTF-8 byte-order mark
    const std::string line = trimmed(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      const std::string rest = trimmed(before_comment(line));
      if (rest.back() != ']' || rest.size() < 3)
        refuse_line(line, number, where, "a section is [name] (see --help for the sections and keys)");
      section = trimmed(rest.substr(1, rest.size() - 2));
      continue;
    }
    const std::size_t eq = line.find('=');
    const std::string key = eq == std::string::npos ? "" : trimmed(line.substr(0, eq));
    if (key.empty()) refuse_line(line, number, where, "neither [section] nor key = value (see --help)");
    std::string value = trimmed(line.substr(eq + 1));
    value = value.starts_with('"') ? unquote(value, line, number, where) : trimmed(before_comment(value));
    out.push_back({section.empty() ? key : cat(section, ".", key), std::move(value), number});
  }
  return out;
}

std::string quoted(const std::string& value) {
  bool plain = value.empty() || (!blank(value.front()) && !blank(value.back()) && value.front() != '"');
  for (std::size_t i = 0; plain && i < value.size(); ++i)
    plain = value[i] != '\n' && !(value[i] == '#' && (i == 0 || blank(value[i - 1])));
  if (plain) return value;
  std::string out = "\"";
  for (const char c : value) out += c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : std::string(1, c);
  return out + "\"";
}

}  // namespace zt::config::ini
