// Boost.Program_options' command-line parser in the style the three programs have always accepted.
#include "config/argv.hpp"

#include <algorithm>
#include <vector>

namespace zt::config::argv {
namespace {
namespace style = po::command_line_style;

// unix_style without guessing (--thr is no --threads) and without grouped short options.
constexpr int kStyle = style::allow_long | style::long_allow_adjacent | style::long_allow_next | style::allow_short |
                       style::allow_dash_for_short | style::short_allow_next;

// Where our command lines differ from Boost's, tried before its own parsers:
// - `--name=` is the empty value (`--data.valid=` clears a file's value); Boost refuses it.
// - `-h` is --help. Not a Boost short option, so that the option before it still takes it as its
//   value (`--config -h` names a file -h), as every value-taking option takes the next argument.
// - A short option is one letter alone: `-qx` and `-abc` are unknown options (Boost reads -q x and
//   -a bc), and so is `--=x` (Boost: a free argument x). Such an option is named by the argument
//   itself, which no option is, so Boost refuses it naming the argument.
std::vector<po::option> our_forms(std::vector<std::string>& args) {
  const std::string& token = args.front();
  po::option o;
  o.original_tokens = {token};
  if (token == "-h") {
    o.string_key = "help";
  } else if (token.size() > 3 && token.starts_with("--") && token.find('=') == token.size() - 1) {
    o.string_key = token.substr(2, token.size() - 3);
    o.value = {""};
  } else if ((token.size() > 2 && token[0] == '-' && token[1] != '-') || token.starts_with("--=")) {
    o.string_key = token;
  } else {
    return {};
  }
  args.erase(args.begin());
  return {o};
}
}  // namespace

po::parsed_options split(const po::options_description& desc, int argc, const char* const* argv, int first) {
  const std::vector<std::string> args(argv + std::min(first, argc), argv + argc);
  return po::command_line_parser(args).options(desc).style(kStyle).extra_style_parser(our_forms).run();
}

std::string text_of(const po::options_description& desc, const po::option& occurrence) {
  boost::any value;
  // The bytes as given: UTF-8 stays UTF-8 (utf8=true would convert through the C locale and throw on any
  // byte >= 0x80: a path, a stop string or a regex in another script).
  desc.find(occurrence.string_key, false).semantic()->parse(value, occurrence.value, /*utf8=*/false);
  return boost::any_cast<std::string>(value);
}

std::string without_value(const std::string& token) { return token.substr(0, token.find('=')); }

std::string name_in(const std::string& token) {
  const std::size_t dashes = token.starts_with("--") ? 2 : token.starts_with("-") ? 1 : 0;
  return without_value(token).substr(dashes);
}

}  // namespace zt::config::argv
