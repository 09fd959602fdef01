// ztrain's command line and INI file, split by Boost.Program_options (config/argv.hpp); every key is
// read as text, then parsed and checked by the option table, so a malformed value gets the table's
// message (key, value, allowed).
#include "config/parse.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "config/argv.hpp"
#include "config/command_line.hpp"
#include "config/hf_config.hpp"
#include "config/ini.hpp"
#include "config/lora.hpp"
#include "config/options.hpp"
#include "config/value.hpp"

namespace zt::config {

// The options that are no configuration key: what to do instead of training, and the INI file.
const std::vector<cli::Flag>& general_flags() {
  using cli::Type;
  static const std::vector<cli::Flag> flags = {
      {.name = "help", .type = Type::kSwitch, .help = "list every option with its default and meaning, then exit",
       .short_name = 'h'},
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
namespace po = boost::program_options;

// Each key's values in the order they take effect: on the command line the last one wins, as job
// scripts append overrides; in a file a key given twice is an error.
using KeyValues = std::map<std::string, std::vector<std::string>, std::less<>>;

// Every key of the option table, its value read as text. On the command line a BOOL key given bare
// (last, or before another option: `--plan --plan.search`) means true; a value after it is its value.
po::options_description key_options(bool bare_bool) {
  po::options_description desc;
  for (const Option& o : options()) {
    po::typed_value<std::string>* text = po::value<std::string>();
    if (bare_bool && o.value_kind == "BOOL") text->implicit_value("true");
    desc.add_options()(o.key.c_str(), text, o.help.c_str());
  }
  return desc;
}

// The general options and the keys. -h is config/argv.cpp's, not a Boost short option.
po::options_description command_line_options() {
  po::options_description desc;
  for (const cli::Flag& f : general_flags()) {
    if (f.type == cli::Type::kSwitch) desc.add_options()(f.name.c_str(), f.help.c_str());
    else desc.add_options()(f.name.c_str(), po::value<std::string>(), f.help.c_str());
  }
  desc.add(key_options(true));
  return desc;
}

std::string did_you_mean(const std::string& key) {
  std::string near = nearest_key(key);
  return near.empty() ? "; see --help for every key" : cat("; did you mean ", near, "?");
}

// Boost's errors as ConfigErrors that say what to do. `where` is "" or " in config file 'PATH'".
[[noreturn]] void refuse(const po::error& e, const std::string& where) {
  if (const auto* u = dynamic_cast<const po::unknown_option*>(&e)) {
    const std::string token = u->get_option_name();
    const std::string key = where.empty() ? argv::name_in(token) : token;
    // `-model.n_layer`: a real key with one dash (the suggestion would be the same text back)
    const auto general = [&](const std::string& name) {
      for (const cli::Flag& f : general_flags())
        if (f.name == name) return true;
      return false;
    };
    if (where.empty() && !token.starts_with("--") && (find_option(key) || general(key)))
      throw ConfigError(cat("unknown option '", token, "': options take two dashes: --", key));
    // `--print-conf`: a general flag's start or a near miss, not a key's
    for (const cli::Flag& f : general_flags())
      if (where.empty() && key.size() >= 4 && (f.name.starts_with(key) || value::edit_distance(key, f.name) <= 2))
        throw ConfigError(cat("unknown option '", key, "'; did you mean --", f.name, "?"));
    throw ConfigError(cat("unknown option '", key, "'", where, did_you_mean(key)));
  }
  throw ConfigError(cat(e.what(), where, " (see --help)"));  // Boost's words: a value missing or not taken
}

struct Arguments {
  KeyValues keys;
  std::set<std::string> switches;  // general switches given ("help" for -h/--help)
  std::optional<std::string> config;
};

// `--name=VALUE` or `--name VALUE` (the next argument, whatever it is); `--name=` is the empty value
// (e.g. `--data.valid=` turns evaluation off over a file's value). A general option given twice, or
// an argument that is no option, is an error.
Arguments parse_arguments(int argc, const char* const* argv) {
  const po::options_description desc = command_line_options();
  po::parsed_options given(&desc);
  try {
    given = argv::split(desc, argc, argv);
  } catch (const po::error& e) {
    refuse(e, "");
  }
  Arguments args;
  for (const po::option& o : given.options) {
    if (o.string_key.empty())
      throw ConfigError("unexpected argument: options are --section.key=value or --config FILE (see --help)");
    const std::string text = argv::text_of(desc, o);
    if (find_option(o.string_key)) {
      args.keys[o.string_key].push_back(text);
      continue;
    }
    const bool again = o.string_key == "config" ? args.config.has_value() : !args.switches.insert(o.string_key).second;
    if (again) throw ConfigError(cat("option '--", o.string_key, "' given more than once"));
    if (o.string_key == "config") args.config = text;
  }
  return args;
}

// The file's entries by key, each key once, in ztrain's INI grammar (config/ini.hpp): its value and line.
// A directory or unreadable path is named, not read as empty.
using FileValues = std::map<std::string, ini::Entry, std::less<>>;
FileValues parse_config_file(const std::string& path) {
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
  const std::vector<ini::Entry> lines = ini::read(in, where);
  if (in.bad()) throw ConfigError(cat("cannot read config file '", path, "': ", std::strerror(errno)));
  FileValues out;
  for (const ini::Entry& e : lines) {
    if (!find_option(e.key))
      throw ConfigError(cat("unknown option '", e.key, "'", where, " (line ", e.line, ")", did_you_mean(e.key)));
    if (!out.emplace(e.key, e).second)
      throw ConfigError(cat("option '", e.key, "' given more than once", where, " (line ", e.line, ")"));
  }
  return out;
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
  FileValues file;
  if (args.config) {
    cl.config_file = *args.config;
    file = parse_config_file(cl.config_file);
  }
  // File first, then each command-line occurrence in order: every value is checked, the last stays. A
  // file's bad value is named with the file and line, as its unknown keys are.
  for (const Option& o : options()) {
    if (const auto entry = file.find(o.key); entry != file.end()) {
      try {
        o.assign(cl.config, entry->second.value);
      } catch (const ConfigError& e) {
        throw ConfigError(cat(e.what(), " (in config file '", cl.config_file, "', line ", entry->second.line, ")"));
      }
    }
    for (const std::string& text : values_of(args.keys, o.key)) o.assign(cl.config, text);
    if (file.count(o.key) || args.keys.count(o.key)) cl.given.insert(o.key);
  }
  // Paths a checkpoint keeps and other programs read from other directories (zgen and zckpt --merge on the
  // checkpoint, a PEFT export's base_model_name_or_path): absolute where they exist.
  for (std::string* path : {&cl.config.init.from, &cl.config.data.vocab}) {
    std::error_code ec;
    if (!path->empty() && std::filesystem::exists(*path, ec))
      *path = std::filesystem::absolute(*path, ec).lexically_normal().string();
  }
  check_peft_base(cl.config);  // a Hub id as an adapter's base: said as such, not as the wrong model
  if (has_config_json(lora_base_path(cl.config))) apply_hf_config(cl.config, cl.given);  // before the checks
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
    out << o.name() << " = " << ini::quoted(o.format(config)) << "\n";
  }
  return out.str();
}

Config from_ini(const std::string& text) {
  Config out;
  std::istringstream in(text);
  for (const ini::Entry& e : ini::read(in, " in a checkpoint's configuration"))
    if (const Option* o = find_option(e.key)) {
      try {
        o->assign(out, e.value);
      } catch (const ConfigError&) {  // a value this ztrain's ranges no longer take: the default stands in
      }
    }
  return out;
}

std::string help_text(const std::string& program) {
  std::ostringstream out;
  out << "Usage: mpirun -np N " << program << " [--config FILE] [--section.key=VALUE ...]\n"
      << "       " << program << " --print-config | --plan | --preflight | --help\n\n"
      << "Trains, fine-tunes (LoRA, QLoRA) and post-trains (RL) GPT-2 and Llama-family models (Llama, Mistral,\n"
      << "Qwen2, Qwen3). Every key has a default; the INI file's [section] key=value is the\n"
      << "option --section.key=VALUE, and the command line wins over the file.\n\n"
      << "Exit codes: 0 done, 1 runtime error, 2 usage or configuration error (nothing started),\n"
      << "75 checkpointed on a signal or time limit (requeue me).\n\n"
      << "general:\n" << cli::flags_help(general_flags());
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
