// ztrain's command line and INI file: every key is read as text, then parsed and checked by the option
// table, so a malformed value gets the table's message (key, value, allowed).
#include "config/parse.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "config/command_line.hpp"
#include "config/hf_config.hpp"
#include "config/lora.hpp"
#include "config/options.hpp"
#include "config/value.hpp"

namespace zt::config {

// The options that are no configuration key: what to do instead of training, and the INI file.
const std::vector<cli::Flag>& general_flags() {
  using cli::Type;
  static const std::vector<cli::Flag> flags = {
      {.name = "help-markdown", .type = Type::kSwitch, .help = "the configuration reference as a Markdown table, then exit"},
      {.name = "config", .value_name = "FILE", .help = "INI configuration file"},
      {.name = "print-config", .type = Type::kSwitch,
       .help = "print the resolved configuration (INI) with the world layout, then exit"},
      {.name = "plan", .type = Type::kSwitch, .help = "print the per-rank memory plan, then exit (0 fits, 2 does not)"},
      {.name = "preflight", .type = Type::kSwitch,
       .help = "measure GEMM rates, collective and node-pair bandwidth over the job's ranks, then exit (0 all fine, "
               "1 flagged)"},
      {.name = "force", .type = Type::kSwitch, .help = "run a configuration the memory planner refuses"},
      {.name = "version", .type = Type::kSwitch, .help = "print the version and git revision, then exit"},
  };
  return flags;
}

namespace {

// Each key's values in the order they take effect: on the command line the last one wins, as job
// scripts append overrides; in a file a key given twice is an error.
using KeyValues = std::map<std::string, std::vector<std::string>, std::less<>>;

const cli::Flag* find_general(std::string_view name) {
  for (const cli::Flag& f : general_flags())
    if (f.name == name) return &f;
  return nullptr;
}

std::string did_you_mean(const std::string& key) {
  std::string near = nearest_key(key);
  return near.empty() ? "; see --help for every key" : cat("; did you mean ", near, "?");
}

// A BOOL key given bare, last or before another option (`--plan --plan.search`), means true.
bool bare_bool(const Option& o, int i, int argc, const char* const* argv) {
  return o.value_kind == "BOOL" && (i + 1 == argc || std::string_view(argv[i + 1]).starts_with("--"));
}

struct Arguments {
  KeyValues keys;
  std::set<std::string> switches;  // general switches given ("help" for -h/--help)
  std::optional<std::string> config;
};

// `--name=VALUE` or `--name VALUE` (the next argument, whatever it is); `--name=` is the empty value
// (e.g. `--data.valid=` turns evaluation off over a file's value).
Arguments parse_arguments(int argc, const char* const* argv) {
  Arguments args;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (options_done || !a.starts_with("-") || a == "-")
      throw ConfigError("unexpected argument: options are --section.key=value or --config FILE (see --help)");
    if (a == "--") {
      options_done = true;
      continue;
    }
    const std::size_t eq = a.find('=');
    const std::size_t dashes = a.starts_with("--") ? 2 : 1;
    const std::string name(a.substr(dashes, eq == std::string_view::npos ? eq : eq - dashes));
    std::optional<std::string> value;
    if (eq != std::string_view::npos) value = std::string(a.substr(eq + 1));
    if (dashes == 1 && a != "-h") throw ConfigError(cat("unknown option '", name, "'", did_you_mean(name)));
    const std::string general_name = a == "-h" ? "help" : name;
    const cli::Flag* general = find_general(general_name);
    if (general_name == "help" || (general && general->type == cli::Type::kSwitch)) {
      if (value) throw ConfigError(cat("option '--", general_name, "' does not take any arguments (see --help)"));
      if (!args.switches.insert(general_name).second)
        throw ConfigError(cat("option '--", general_name, "' given more than once"));
      continue;
    }
    const Option* key = general ? nullptr : find_option(name);
    if (!general && !key) throw ConfigError(cat("unknown option '", name, "'", did_you_mean(name)));
    if (!value && key && bare_bool(*key, i, argc, argv)) value = "true";
    if (!value && i + 1 == argc) throw ConfigError(cat("the required argument for option '--", name, "' is missing (see --help)"));
    if (!value) value = argv[++i];
    if (key) {
      args.keys[key->key].push_back(*value);
    } else {
      if (args.config) throw ConfigError(cat("option '--", name, "' given more than once"));
      args.config = *value;
    }
  }
  return args;
}

std::string trim(std::string_view s) {
  const std::size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  return std::string(s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1));
}

// The file's values, each key once: `[section]` lines, `key = value` lines, `#` comments (to the end
// of the line). A directory or unreadable path is named, not read as empty.
KeyValues parse_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(cat("--config ", path, " is a directory: give the INI file (e.g. inputs/configs/cpu-tiny.ini)"));
  std::ifstream in(path);
  if (!in) {
    const bool exists = std::filesystem::exists(path, ec);
    throw ConfigError(cat("cannot read config file '", path, "': ",
                          exists ? cat("not readable (", std::strerror(errno), ")") : "no such file"));
  }
  const std::string where = cat(" in config file '", path, "'");
  KeyValues values;
  std::string section;
  for (std::string raw; std::getline(in, raw);) {
    const std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    if (line.front() == '[' && line.back() == ']') {
      section = line.substr(1, line.size() - 2);
      if (!section.empty() && section.back() != '.') section += '.';
      continue;
    }
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos)
      throw ConfigError(cat("line '", line, "'", where, " is neither [section] nor key = value (see --help)"));
    const std::string key = section + trim(line.substr(0, eq));
    if (!find_option(key)) throw ConfigError(cat("unknown option '", key, "'", where, did_you_mean(key)));
    if (values.count(key)) throw ConfigError(cat("option '", key, "' given more than once", where));
    values[key].push_back(trim(line.substr(eq + 1)));
  }
  if (in.bad()) throw ConfigError(cat("cannot read config file '", path, "': ", std::strerror(errno)));
  return values;
}

// The values given for `key`, in the order they take effect (empty: not given).
const std::vector<std::string>& values_of(const KeyValues& given, const std::string& key) {
  static const std::vector<std::string> none;
  const auto it = given.find(key);
  return it == given.end() ? none : it->second;
}
}  // namespace

CommandLine parse_command_line(int argc, const char* const* argv) {
  const Arguments args = parse_arguments(argc, argv);
  CommandLine cl;
  cl.help = args.switches.count("help") > 0;
  cl.help_markdown = args.switches.count("help-markdown") > 0;
  cl.print_config = args.switches.count("print-config") > 0;
  cl.plan = args.switches.count("plan") > 0;
  cl.preflight = args.switches.count("preflight") > 0;
  cl.force = args.switches.count("force") > 0;
  cl.version = args.switches.count("version") > 0;
  if (cl.help || cl.help_markdown || cl.version) return cl;
  KeyValues file;
  if (args.config) {
    cl.config_file = *args.config;
    file = parse_config_file(cl.config_file);
  }
  // File first, then each command-line occurrence in order: every value is checked, the last stays.
  for (const Option& o : options()) {
    for (const std::string& text : values_of(file, o.key)) o.assign(cl.config, text);
    for (const std::string& text : values_of(args.keys, o.key)) o.assign(cl.config, text);
    if (file.count(o.key) || args.keys.count(o.key)) cl.given.insert(o.key);
  }
  if (is_hf_directory(lora_base_path(cl.config))) apply_hf_config(cl.config, cl.given);  // before the checks
  validate(cl.config);
  return cl;
}

std::string to_ini(const Config& config) {
  std::ostringstream out;
  std::string section;
  for (const Option& o : options()) {
    if (o.section() != section) {
      section = o.section();
      out << (out.tellp() > 0 ? "\n" : "") << "[" << section << "]\n";
    }
    out << o.name() << " = " << o.format(config) << "\n";
  }
  return out.str();
}

std::string help_text(const std::string& program) {
  std::ostringstream out;
  out << "Usage: mpirun -np N " << program << " [--config FILE] [--section.key=VALUE ...]\n"
      << "       " << program << " --print-config | --plan | --preflight | --help\n\n"
      << "Trains a GPT-2-style model. Every key has a default; the INI file's [section] key=value is the\n"
      << "option --section.key=VALUE, and the command line wins over the file.\n\n"
      << "Exit codes: 0 done, 1 runtime error, 2 usage or configuration error (nothing started),\n"
      << "75 checkpointed on a signal or time limit (requeue me).\n\n"
      << "general:\n  -h, --help\n      list every option with its default and meaning, then exit\n"
      << cli::flags_help(general_flags());
  std::string section;
  for (const Option& o : options()) {
    if (o.section() != section) out << "\n[" << (section = o.section()) << "]\n";
    std::string def = o.format(Config{});
    out << "  --" << o.key << "=" << o.value_kind << "  (default: " << (def.empty() ? "''" : def) << ")\n"
        << "      " << o.help << "\n";
  }
  return out.str();
}

std::string reference_markdown() {
  std::ostringstream out;
  out << "| key | values | default | meaning |\n|---|---|---|---|\n";
  for (const Option& o : options()) {
    std::string def = o.format(Config{});
    std::string kind = o.value_kind;  // a|b|c: escape the pipes inside a Markdown table cell
    for (std::size_t i = kind.find('|'); i != std::string::npos; i = kind.find('|', i + 2)) kind.replace(i, 1, "\\|");
    out << "| `" << o.key << "` | " << kind << " | `" << (def.empty() ? "''" : def) << "` | " << o.help << " |\n";
  }
  return out.str();
}

}  // namespace zt::config
