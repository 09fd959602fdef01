// ztrain's INI files (--config, and the configuration a checkpoint keeps): `[section]` lines, then
// `key = value` lines, the dotted key `section.key`. The grammar, in full:
//   - a UTF-8 byte-order mark at the start is skipped (editors on other systems write one);
//   - blank lines, and lines whose first non-blank character is `#` or `;`, are comments;
//   - blanks around keys and values are dropped;
//   - a `#` after a blank starts a comment to the end of the line (`lr = 3e-4  # warm`); a `#` inside a
//     word is part of the value (`reward = regex:#### ([0-9]+)`, `dir = runs/#2`);
//   - a value in double quotes is taken as written between them, blanks and ` #` included, with the
//     escapes \" \\ \n (`sample_prompt = "Issue #5 is"`); to_ini writes such values quoted.
// Boost.Program_options' reader cuts every value at its first `#` (GSM8K's answer marker `####`), so
// ztrain reads its files here and checks each key against the option table (config/parse.cpp).
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace zt::config::ini {

struct Entry {
  std::string key;    // "section.key" (or "key" before any section)
  std::string value;  // the value as meant: unquoted, unescaped, its comment dropped
  int line = 0;       // 1-based, for errors
};

// Every `key = value` line of `in`, in order. A line that is none of the forms above, or an unclosed
// quote, is a ConfigError naming the line and `where` (" in config file 'PATH'").
std::vector<Entry> read(std::istream& in, const std::string& where);

// `value` as a value of an INI line that reads back as itself: as is where it can, else quoted.
std::string quoted(const std::string& value);

}  // namespace zt::config::ini
