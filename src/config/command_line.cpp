// The shared command-line parser: Boost.Program_options splits argv by the flag table
// (config/argv.hpp); each value is then checked against its flag, so every error names the flag and
// the value given, and says what is allowed (the range, the choices, the value it needs).
#include "config/command_line.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "config/argv.hpp"
#include "config/value.hpp"
#include "core/error.hpp"

namespace zt::config::cli {
namespace {
namespace po = boost::program_options;

std::string shown(std::string_view value) { return value.empty() ? "''" : std::string(value); }

std::string number_text(double v, Type type) {
  return type == Type::kInt ? std::to_string(static_cast<std::int64_t>(v)) : value::format_double(v);
}

// "an integer in [1, 1048576]", "a number >= 1", "gpt2, cl100k or o200k": what the flag accepts.
std::string allowed(const Flag& f) {
  if (f.type == Type::kChoice) {
    std::string out;
    for (std::size_t i = 0; i < f.choices.size(); ++i)
      out += (i == 0 ? "" : i + 1 == f.choices.size() ? " or " : ", ") + f.choices[i];
    return out;
  }
  std::string what = f.type == Type::kInt ? "an integer" : "a number";
  const bool low = std::isfinite(f.min), high = std::isfinite(f.max);
  if (low && high) return cat(what, " in [", number_text(f.min, f.type), ", ", number_text(f.max, f.type), "]");
  if (low) return cat(what, " >= ", number_text(f.min, f.type));
  if (high) return cat(what, " <= ", number_text(f.max, f.type));
  return what;
}

// The whole text as a number, by the option table's strict parsers (config/value.hpp): "3x", "" and
// "1e999" are not numbers; an integer is read in 64 bits, so 4294967298 is out of range, never 2.
std::optional<double> read_number(std::string_view text, Type type) {
  // value's parsers trim an INI value's blanks; a flag's value is taken as given.
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  if (!text.empty() && (space(text.front()) || space(text.back()))) return std::nullopt;
  try {
    if (type == Type::kInt)
      return static_cast<double>(value::parse_int("", text, std::numeric_limits<std::int64_t>::min(),
                                                  std::numeric_limits<std::int64_t>::max()));
    return value::parse_double("", text);
  } catch (const ConfigError&) {
    return std::nullopt;  // check_value names the flag and what it accepts
  }
}

void check_value(const Flag& f, std::string_view value) {
  bool ok = true;
  if (f.type == Type::kInt || f.type == Type::kNum) {
    const std::optional<double> v = read_number(value, f.type);
    ok = v && *v >= f.min && *v <= f.max;
  } else if (f.type == Type::kChoice) {
    ok = std::find(f.choices.begin(), f.choices.end(), value) != f.choices.end();
  }
  if (!ok) throw ConfigError(cat("--", f.name, " ", shown(value), ": must be ", allowed(f)));
}

const Flag* find_flag(const Spec& spec, std::string_view name) {
  for (const Flag& f : spec.flags)
    if (f.name == name) return &f;
  return nullptr;
}

bool takes(const Command* command, std::string_view flag) {
  return !command || std::find(command->flags.begin(), command->flags.end(), flag) != command->flags.end();
}

// A flag's help under it, indented and wrapped at 100 columns.
std::string wrapped(std::string_view text) {
  constexpr std::size_t kWidth = 100;
  const std::string indent = "      ";
  std::string out = indent, word;
  std::size_t column = indent.size();
  std::istringstream words{std::string(text)};
  while (words >> word) {
    if (column > indent.size() && column + 1 + word.size() > kWidth) out += "\n" + indent, column = indent.size();
    if (column > indent.size()) out += ' ', ++column;
    out += word, column += word.size();
  }
  return out + "\n";
}

std::string see_help(const Spec& spec) { return cat(" (see ", spec.program, " --help)"); }

// "unknown option --vocb; did you mean --vocab?", or the subcommand that takes the flag.
[[noreturn]] void unknown(const Spec& spec, const Command* command, std::string_view given, std::string_view name) {
  if (const Flag* f = find_flag(spec, name); f && command) {
    std::string owners;
    for (const Command& c : spec.commands)
      if (takes(&c, f->name)) owners += (owners.empty() ? "" : ", ") + c.name;
    throw ConfigError(cat("--", name, " is no option of ", spec.program, " ", command->name,
                          owners.empty() ? "" : cat(": it belongs to ", spec.program, " ", owners), see_help(spec)));
  }
  std::string near;
  std::size_t best = 3;  // farther than 2 edits is not a typo
  std::vector<std::string> starting;  // --temp: the start of --temperature, nearer than --tp's 2 edits
  for (const Flag& f : spec.flags) {
    if (f.hidden || !takes(command, f.name)) continue;
    if (name.size() >= 3 && f.name.starts_with(name)) starting.push_back(f.name);
    // A one-letter option (-x) is a short flag: two edits away from every short long name (--tp) says nothing
    if (name.size() < 2) continue;
    if (const std::size_t d = value::edit_distance(name, f.name); d < best) best = d, near = f.name;
  }
  if (starting.size() == 1) near = starting.front();
  throw ConfigError(cat("unknown option ", given, near.empty() ? "" : cat("; did you mean --", near, "?"), see_help(spec)));
}

const Command& find_command(const Spec& spec, int argc, const char* const* argv) {
  std::string names;
  for (const Command& c : spec.commands) names += (names.empty() ? "" : ", ") + c.name;
  if (argc < 2) throw ConfigError(cat("no command given: give one of ", names, see_help(spec)));
  for (const Command& c : spec.commands)
    if (c.name == argv[1]) return c;
  throw ConfigError(cat("unknown command '", argv[1], "': give one of ", names, see_help(spec)));
}

void check_positionals(const Spec& spec, const Command* command, const std::vector<std::string>& free) {
  if (command) {
    const std::vector<std::string>& want = command->positionals;
    const std::string form = cat(spec.program, " ", command->name);
    if (free.size() < want.size())
      throw ConfigError(cat(command->name, " needs ", want[free.size()], ": ", form, " ", want.front(), see_help(spec)));
    if (free.size() > want.size())
      throw ConfigError(cat("unexpected argument '", free[want.size()], "': ", form, " takes ", want.size(),
                            " argument(s)", see_help(spec)));
  } else if (spec.positional.empty() && !free.empty()) {
    throw ConfigError(cat("unexpected argument '", free.front(), "'", see_help(spec)));
  }
}

// The flags `command` takes (every flag without commands), each value read as text for check_value.
po::options_description flag_options(const Spec& spec, const Command* command) {
  po::options_description desc;
  for (const Flag& f : spec.flags) {
    if (!takes(command, f.name)) continue;
    const std::string names = f.short_name ? cat(f.name, ",", f.short_name) : f.name;
    if (f.type == Type::kSwitch) desc.add_options()(names.c_str(), f.help.c_str());
    else desc.add_options()(names.c_str(), po::value<std::string>(), f.help.c_str());
  }
  return desc;
}

[[noreturn]] void needs_value(const Spec& spec, const Flag& f) {
  throw ConfigError(cat("--", f.name, " needs a value: --", f.name, " ", f.value_name, see_help(spec)));
}

// Boost's errors in our words: the argument as given, the nearest flag, the value a flag needs.
[[noreturn]] void refuse(const Spec& spec, const Command* command, const po::error& e) {
  if (const auto* u = dynamic_cast<const po::unknown_option*>(&e)) {
    const std::string token = u->get_option_name();  // the argument itself: "--vocb=x", "-x"
    unknown(spec, command, argv::without_value(token), token.starts_with("--") ? argv::name_in(token) : token.substr(1));
  }
  if (const auto* s = dynamic_cast<const po::invalid_command_line_syntax*>(&e)) {
    const Flag* f = find_flag(spec, argv::name_in(s->get_option_name()));
    if (f && s->kind() == po::invalid_syntax::missing_parameter) needs_value(spec, *f);
    if (f && s->kind() == po::invalid_syntax::extra_parameter)
      throw ConfigError(cat("--", f->name, " takes no value: give --", f->name, " alone", see_help(spec)));
  }
  throw ConfigError(cat(e.what(), see_help(spec)));
}
}  // namespace

std::vector<std::string> unranged(const std::vector<Flag>& flags) {
  std::vector<std::string> out;
  for (const Flag& f : flags)
    if ((f.type == Type::kInt || f.type == Type::kNum) && !(std::isfinite(f.min) && std::isfinite(f.max)))
      out.push_back(f.name);
  return out;
}

Args parse(const Spec& spec, int argc, const char* const* argv) {
  const std::vector<std::string> no_range = unranged(spec.flags);
  ZT_CHECK(no_range.empty(), spec.program, "'s flag table: --", no_range.empty() ? "" : no_range.front(),
           " is a number without a range");
  Args a;
  a.spec_ = &spec;
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i)
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") return a.help_ = true, a;
  const Command* command = spec.commands.empty() ? nullptr : &find_command(spec, argc, argv);
  if (command) a.command_ = command->name;
  const po::options_description desc = flag_options(spec, command);
  po::parsed_options given(&desc);
  try {
    given = argv::split(desc, argc, argv, command ? 2 : 1);
  } catch (const po::error& e) {
    refuse(spec, command, e);
  }
  for (const po::option& o : given.options) {
    if (o.string_key.empty()) {
      a.positional_.push_back(o.value.front());
      continue;
    }
    const Flag& f = *find_flag(spec, o.string_key);
    std::vector<std::string>& values = a.values_[f.name];
    if (f.type == Type::kSwitch) {
      values.assign(1, "true");
      continue;
    }
    const std::string value = argv::text_of(desc, o);
    // `--out --threads 2`: Boost gives --out the next argument, whatever it is; a flag is no value.
    if (o.original_tokens.size() == 2 && value.starts_with("--")) needs_value(spec, f);
    check_value(f, value);
    if (f.type != Type::kList && !values.empty())
      throw ConfigError(cat("--", f.name, " given twice (", shown(values.front()), ", then ", shown(value), "): give it once"));
    values.push_back(value);
  }
  check_positionals(spec, command, a.positional_);
  return a;
}

const Flag& Args::flag(std::string_view name) const {
  const Flag* f = find_flag(*spec_, name);
  ZT_CHECK(f != nullptr, "no flag --", name, " in ", spec_->program, "'s table");
  return *f;
}

const std::vector<std::string>* Args::values(std::string_view name) const {
  flag(name);  // a name the table lacks is our bug, not the user's
  const auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

bool Args::given(std::string_view name) const { return values(name) != nullptr; }
bool Args::on(std::string_view name) const { return given(name); }

std::string Args::text(std::string_view name) const {
  const std::vector<std::string>* v = values(name);
  return v ? v->back() : flag(name).default_value;
}

std::int64_t Args::integer(std::string_view name) const {
  const std::string t = text(name);
  std::int64_t v = 0;
  std::from_chars(t.data(), t.data() + t.size(), v);  // checked by parse (the default by the table's author)
  return v;
}

double Args::number(std::string_view name) const {
  const std::string t = text(name);
  double v = 0;
  std::from_chars(t.data(), t.data() + t.size(), v);
  return v;
}

std::vector<std::string> Args::list(std::string_view name) const {
  const std::vector<std::string>* v = values(name);
  return v ? *v : std::vector<std::string>{};
}

std::string flags_help(const std::vector<Flag>& flags, const std::vector<Command>& commands) {
  std::ostringstream out;
  for (const Flag& f : flags) {
    if (f.hidden) continue;
    out << "  " << (f.short_name ? cat("-", f.short_name, ", ") : "") << "--" << f.name;
    if (f.type != Type::kSwitch) out << " " << f.value_name;
    if (f.type == Type::kInt || f.type == Type::kNum) out << "  (" << allowed(f) << ")";
    if (!f.default_value.empty()) out << "  (default: " << f.default_value << ")";
    if (f.type == Type::kList) out << "  (repeatable)";
    std::string used_by;
    for (const Command& c : commands)
      if (takes(&c, f.name)) used_by += (used_by.empty() ? "" : ", ") + c.name;
    if (!used_by.empty()) out << "  [" << used_by << "]";
    out << "\n" << wrapped(f.help);
  }
  return out.str();
}

std::string help_text(const Spec& spec) {
  std::ostringstream out;
  bool first = true;
  for (const Command& c : spec.commands) {
    std::istringstream lines(c.usage);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with(c.name)) out << (first ? "usage: " : "       ") << spec.program << " ";
      out << line << "\n";
      first = false;
    }
  }
  out << spec.about << (spec.about.empty() || spec.about.ends_with('\n') ? "" : "\n") << "\noptions:\n"
      << "  -h, --help\n      show this help, then exit\n"
      << flags_help(spec.flags, spec.commands);
  return out.str();
}

}  // namespace zt::config::cli
