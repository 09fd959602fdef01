// The shared command-line parser (ztok, zckpt): types, ranges, choices, positional arguments,
// subcommands, and errors that name the flag, the value and the fix.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/command_line.hpp"
#include "core/error.hpp"

namespace zt::config::cli {
namespace {

Spec tool_spec() {
  Spec s;
  s.program = "tool";
  s.about = "usage: tool [options] INPUT...";
  s.positional = "INPUT";
  s.flags = {
      {.name = "out", .value_name = "DIR", .help = "where the output goes"},
      {.name = "threads", .type = Type::kInt, .value_name = "N", .help = "worker threads", .default_value = "4",
       .min = 1, .max = 64},
      {.name = "fraction", .type = Type::kNum, .value_name = "F", .help = "share kept", .default_value = "0.5",
       .min = 0, .max = 1},
      {.name = "format", .type = Type::kChoice, .value_name = "text|jsonl", .help = "input format",
       .default_value = "text", .choices = {"text", "jsonl", "csv"}},
      {.name = "special", .type = Type::kList, .value_name = "NAME=ID", .help = "special tokens"},
      {.name = "quiet", .type = Type::kSwitch, .help = "no progress line", .short_name = 'q'},
      {.name = "debug-knob", .type = Type::kInt, .default_value = "0", .min = 0, .max = 100, .hidden = true},
  };
  return s;
}

Args parse_args(const Spec& spec, std::vector<const char*> args) {
  args.insert(args.begin(), spec.program.c_str());
  return parse(spec, static_cast<int>(args.size()), args.data());
}

// The ConfigError's message ("" if none was thrown).
std::string error_of(const Spec& spec, const std::vector<const char*>& args) {
  try {
    parse_args(spec, args);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    return e.what();
  }
  return "";
}

TEST(CommandLine, TypedValuesAndDefaults) {
  const Spec spec = tool_spec();
  const Args a = parse_args(spec, {"--out", "o", "--threads=8", "--fraction", "0.25", "-q", "in.txt"});
  EXPECT_EQ(a.text("out"), "o");
  EXPECT_EQ(a.integer("threads"), 8);
  EXPECT_DOUBLE_EQ(a.number("fraction"), 0.25);
  EXPECT_TRUE(a.on("quiet"));
  EXPECT_EQ(a.text("format"), "text");  // the default, not given
  EXPECT_FALSE(a.given("format"));
  EXPECT_EQ(a.integer("debug-knob"), 0);
  EXPECT_TRUE(a.list("special").empty());
  EXPECT_EQ(a.positional(), std::vector<std::string>{"in.txt"});
  const Args d = parse_args(spec, {});
  EXPECT_EQ(d.integer("threads"), 4);
  EXPECT_DOUBLE_EQ(d.number("fraction"), 0.5);
  EXPECT_FALSE(d.on("quiet"));
}

TEST(CommandLine, OutOfRangeOrMalformedNumbersNameTheFlagValueAndRange) {
  const Spec spec = tool_spec();
  EXPECT_EQ(error_of(spec, {"--threads", "0"}), "--threads 0: must be an integer in [1, 64]");
  EXPECT_EQ(error_of(spec, {"--threads=65"}), "--threads 65: must be an integer in [1, 64]");
  EXPECT_EQ(error_of(spec, {"--threads", "4x"}), "--threads 4x: must be an integer in [1, 64]");
  EXPECT_EQ(error_of(spec, {"--threads", "2.5"}), "--threads 2.5: must be an integer in [1, 64]");
  // Read in 64 bits, never wrapped: 2^32 + 2 is not 2.
  EXPECT_EQ(error_of(spec, {"--threads", "4294967298"}), "--threads 4294967298: must be an integer in [1, 64]");
  EXPECT_EQ(error_of(spec, {"--fraction=1.5"}), "--fraction 1.5: must be a number in [0, 1]");
  EXPECT_EQ(error_of(spec, {"--fraction=nan"}), "--fraction nan: must be a number in [0, 1]");
  EXPECT_EQ(error_of(spec, {"--fraction="}), "--fraction '': must be a number in [0, 1]");
  EXPECT_EQ(error_of(spec, {"--debug-knob", "-1"}), "--debug-knob -1: must be an integer in [0, 100]");
}

TEST(CommandLine, ChoicesAreCheckedAndListed) {
  const Spec spec = tool_spec();
  EXPECT_EQ(parse_args(spec, {"--format", "csv"}).text("format"), "csv");
  EXPECT_EQ(error_of(spec, {"--format", "xml"}), "--format xml: must be text, jsonl or csv");
}

TEST(CommandLine, PositionalArgumentsAnywhereAndAfterDoubleDash) {
  const Spec spec = tool_spec();
  const Args a = parse_args(spec, {"a", "--out", "o", "b", "-q", "--", "--c", "-"});
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"a", "b", "--c", "-"}));
  Spec none = tool_spec();
  none.positional.clear();
  EXPECT_EQ(error_of(none, {"stray"}), "unexpected argument 'stray' (see tool --help)");
}

TEST(CommandLine, UnknownFlagSuggestsTheNearestVisibleOne) {
  const Spec spec = tool_spec();
  EXPECT_EQ(error_of(spec, {"--thread", "3"}), "unknown option --thread; did you mean --threads? (see tool --help)");
  EXPECT_EQ(error_of(spec, {"--outt=x"}), "unknown option --outt; did you mean --out? (see tool --help)");
  EXPECT_EQ(error_of(spec, {"--zzzzzz"}), "unknown option --zzzzzz (see tool --help)");
  EXPECT_EQ(error_of(spec, {"-x"}), "unknown option -x (see tool --help)");
  // No guessing of abbreviations: --thr is not --threads, but the flag it begins is named.
  EXPECT_EQ(error_of(spec, {"--thr", "3"}), "unknown option --thr; did you mean --threads? (see tool --help)");
  EXPECT_EQ(error_of(spec, {"-x"}), "unknown option -x (see tool --help)");  // no two-edit guess from one letter
}

TEST(CommandLine, MissingValueSwitchValueAndRepeatsAreRefused) {
  const Spec spec = tool_spec();
  EXPECT_EQ(error_of(spec, {"--out"}), "--out needs a value: --out DIR (see tool --help)");
  EXPECT_EQ(error_of(spec, {"--out", "--threads", "2"}), "--out needs a value: --out DIR (see tool --help)");
  EXPECT_EQ(error_of(spec, {"--quiet=yes"}), "--quiet takes no value: give --quiet alone (see tool --help)");
  EXPECT_EQ(error_of(spec, {"--out", "a", "--out=b"}), "--out given twice (a, then b): give it once");
  // A repeatable flag keeps every value in order; a negative number is a value, not a flag.
  const Args a = parse_args(spec, {"--special", "A=1", "--special=B=2"});
  EXPECT_EQ(a.list("special"), (std::vector<std::string>{"A=1", "B=2"}));
}

// Boost.Program_options splits argv (config/argv.cpp); these are the forms it would read otherwise.
TEST(CommandLine, ArgumentFormsAreTheSameAsBeforeBoost) {
  const Spec spec = tool_spec();
  // A flag's value is the next argument unless that starts with --: a negative number, "-" are values.
  EXPECT_EQ(error_of(spec, {"--threads", "-3"}), "--threads -3: must be an integer in [1, 64]");
  EXPECT_EQ(parse_args(spec, {"--out", "-", "x"}).text("out"), "-");
  EXPECT_EQ(error_of(spec, {"--out", "--"}), "--out needs a value: --out DIR (see tool --help)");
  // A short flag is one letter alone: -qx is not -q x.
  EXPECT_EQ(error_of(spec, {"-qx"}), "unknown option -qx (see tool --help)");
  EXPECT_EQ(error_of(spec, {"--=x"}), "unknown option -- (see tool --help)");
  EXPECT_EQ(error_of(spec, {"--quiet="}), "--quiet takes no value: give --quiet alone (see tool --help)");
  EXPECT_EQ(parse_args(spec, {"--out="}).text("out"), "");  // the empty value
  EXPECT_TRUE(parse_args(spec, {"-q", "--quiet"}).on("quiet"));  // a switch may repeat
  // A value is taken as given: blanks around a number are not trimmed (an INI file's are).
  EXPECT_EQ(error_of(spec, {"--threads", " 4"}), "--threads  4: must be an integer in [1, 64]");
  EXPECT_EQ(error_of(spec, {"--threds=4"}), "unknown option --threds; did you mean --threads? (see tool --help)");
}

TEST(CommandLine, HelpAnywhereSkipsTheChecks) {
  const Spec spec = tool_spec();
  EXPECT_TRUE(parse_args(spec, {"--threads", "0", "--help"}).help());
  EXPECT_TRUE(parse_args(spec, {"-h"}).help());
  EXPECT_FALSE(parse_args(spec, {"--", "--help"}).help());  // after --, a file named --help
}

TEST(CommandLine, HelpIsGeneratedFromTheTable) {
  const std::string help = help_text(tool_spec());
  EXPECT_EQ(help.find("usage: tool [options] INPUT..."), 0u) << help;
  EXPECT_NE(help.find("  --threads N  (an integer in [1, 64])  (default: 4)\n      worker threads\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --format text|jsonl  (default: text)\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  -q, --quiet\n      no progress line\n"), std::string::npos) << help;
  EXPECT_NE(help.find("--special NAME=ID  (repeatable)"), std::string::npos) << help;
  EXPECT_EQ(help.find("debug-knob"), std::string::npos) << "hidden flags stay out of --help";
}

Spec tool_with_commands() {
  Spec s = tool_spec();
  s.positional.clear();
  s.commands = {{.name = "show", .positionals = {"DIR"}, .flags = {}, .usage = "show DIR     what DIR holds"},
                {.name = "copy", .positionals = {"DIR"}, .flags = {"out", "threads"}, .usage = "copy DIR --out DIR2"}};
  return s;
}

TEST(CommandLine, SubcommandsTakeTheirOwnFlagsAndArguments) {
  const Spec spec = tool_with_commands();
  const Args a = parse_args(spec, {"copy", "src", "--out", "dst"});
  EXPECT_EQ(a.command(), "copy");
  EXPECT_EQ(a.positional(), std::vector<std::string>{"src"});
  EXPECT_EQ(a.text("out"), "dst");
  EXPECT_EQ(error_of(spec, {}), "no command given: give one of show, copy (see tool --help)");
  EXPECT_EQ(error_of(spec, {"move", "x"}), "unknown command 'move': give one of show, copy (see tool --help)");
  EXPECT_EQ(error_of(spec, {"show"}), "show needs DIR: tool show DIR (see tool --help)");
  EXPECT_EQ(error_of(spec, {"show", "a", "b"}), "unexpected argument 'b': tool show takes 1 argument(s) (see tool --help)");
  EXPECT_EQ(error_of(spec, {"show", "a", "--out", "x"}), "--out is no option of tool show: it belongs to tool copy (see tool --help)");
  EXPECT_EQ(error_of(spec, {"show", "a", "--quiet"}), "--quiet is no option of tool show (see tool --help)");
  const std::string help = help_text(spec);
  EXPECT_EQ(help.find("usage: tool show DIR     what DIR holds\n       tool copy DIR --out DIR2\n"), 0u) << help;
  EXPECT_NE(help.find("  --out DIR  [copy]\n"), std::string::npos) << help;
}

}  // namespace
}  // namespace zt::config::cli
