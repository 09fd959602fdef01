// The command-line parser of ztok and zckpt: one table of flags (type, default, range or choices,
// help), positional arguments and subcommands; Boost.Program_options splits argv by it (argv.hpp).
// --help is generated from the table; a malformed, unknown or out-of-range flag is a ConfigError
// (exit 2) naming the flag, the value and the fix.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace zt::config::cli {

enum class Type {
  kSwitch,  // --flag alone (no value): on when given
  kInt,     // a whole number in [min, max]
  kNum,     // a finite number in [min, max]
  kText,    // any text
  kChoice,  // one of `choices`
  kList,    // text, repeatable: every occurrence kept in order
};

struct Flag {
  std::string name;        // "vocab": --vocab VALUE or --vocab=VALUE
  Type type = Type::kText;
  std::string value_name;  // "PATH" in --help and in "needs a value" (kSwitch: unused)
  std::string help;
  std::string default_value;  // the value when the flag is absent ("": none), shown in --help
  double min = -std::numeric_limits<double>::infinity();  // kInt, kNum: both must be given (unranged())
  double max = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices;  // kChoice
  char short_name = 0;               // 'q': -q as well as --quiet (switches only)
  bool hidden = false;               // tests only: parsed, not listed in --help
};

// A subcommand (zckpt info DIR ...): its positional arguments, all required, and the flags it takes.
struct Command {
  std::string name;
  std::vector<std::string> positionals;  // {"DIR"}
  std::vector<std::string> flags;        // names of Spec::flags
  std::string usage;                     // its lines of --help, after "program name"
};

struct Spec {
  std::string program;  // "ztok": error messages and --help name it
  std::string about;    // --help's text above the flags
  std::vector<Flag> flags;
  std::string positional;         // "INPUT": any number of free arguments; "" none (Command's own)
  std::vector<Command> commands;  // non-empty: the first argument names one
};

// What was given: every value was checked against its flag's type, range and choices.
class Args {
 public:
  bool help() const { return help_; }
  const std::string& command() const { return command_; }
  const std::vector<std::string>& positional() const { return positional_; }
  bool given(std::string_view flag) const;
  bool on(std::string_view flag) const;  // a switch
  std::int64_t integer(std::string_view flag) const;
  double number(std::string_view flag) const;
  std::string text(std::string_view flag) const;  // kText, kChoice: the value or the default
  std::vector<std::string> list(std::string_view flag) const;

 private:
  friend Args parse(const Spec& spec, int argc, const char* const* argv);
  const Flag& flag(std::string_view name) const;
  const std::vector<std::string>* values(std::string_view name) const;  // null: absent
  const Spec* spec_ = nullptr;
  bool help_ = false;
  std::string command_;
  std::vector<std::string> positional_;
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
};

// The kInt and kNum flags without a finite range at both ends (their names): every number flag states
// its range (a unit test walks every table; parse() refuses a table with one, as our bug).
std::vector<std::string> unranged(const std::vector<Flag>& flags);

// argv[0] is the program. -h/--help anywhere: help() (nothing else is checked). Throws ConfigError.
// The spec must outlive the Args.
Args parse(const Spec& spec, int argc, const char* const* argv);
std::string help_text(const Spec& spec);
// --help's lines for these flags (hidden ones left out), each naming the commands that take it.
std::string flags_help(const std::vector<Flag>& flags, const std::vector<Command>& commands = {});

}  // namespace zt::config::cli
