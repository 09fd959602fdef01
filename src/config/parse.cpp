// Boost.Program_options front end: every key is read as text, then parsed and checked by the option
// table, so a malformed value gets our message (key, value, allowed) rather than a bare bad_lexical_cast.
#include "config/parse.hpp"

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "config/hf_config.hpp"
#include "config/lora.hpp"
#include "config/options.hpp"
#include "config/value.hpp"

namespace zt::config {
namespace po = boost::program_options;
namespace {

po::options_description key_options() {
  po::options_description desc("configuration keys");
  // Every occurrence is kept (in order): on the command line the last one wins, as job scripts append
  // overrides; in a file a key given twice is an error.
  for (const Option& o : options())
    desc.add_options()(o.key.c_str(), po::value<std::vector<std::string>>(), o.help.c_str());
  return desc;
}

po::options_description general_options() {
  po::options_description desc("general");
  desc.add_options()
      ("help,h", "list every option with its default and meaning, then exit")
      ("help-markdown", "the configuration reference as a Markdown table, then exit")
      ("config", po::value<std::string>(), "INI configuration file")
      ("print-config", "print the resolved configuration (INI) with the world layout, then exit")
      ("plan", "print the per-rank memory plan, then exit (0 fits, 2 does not)")
      ("preflight", "measure GEMM rates, collective and node-pair bandwidth over the job's ranks, then exit (0 all fine, 1 flagged)")
      ("force", "run a configuration the memory planner refuses")
      ("version", "print the version and git revision, then exit");
  return desc;
}

std::string did_you_mean(const std::string& key) {
  std::string near = nearest_key(key);
  return near.empty() ? "; see --help for every key" : cat("; did you mean ", near, "?");
}

// Turns Boost's exceptions into ConfigErrors that say what to do. `where` is "" or " in FILE".
[[noreturn]] void rethrow_po_error(const po::error& e, const std::string& where) {
  if (auto* u = dynamic_cast<const po::unknown_option*>(&e)) {
    std::string key = u->get_option_name();
    while (!key.empty() && key.front() == '-') key.erase(0, 1);
    key = key.substr(0, key.find('='));  // "--optim.lrr=3" names the key "optim.lrr"
    throw ConfigError(cat("unknown option '", key, "'", where, did_you_mean(key)));
  }
  if (dynamic_cast<const po::too_many_positional_options_error*>(&e))
    throw ConfigError("unexpected argument: options are --section.key=value or --config FILE (see --help)");
  if (auto* m = dynamic_cast<const po::multiple_occurrences*>(&e))
    throw ConfigError(cat("option '", m->get_option_name(), "' given more than once", where));
  throw ConfigError(cat(e.what(), where, " (see --help)"));
}

// A BOOL key given bare, last or before another option (`--plan --plan.search`), means true.
bool bare_bool_flag(std::string_view a, int i, int argc, const char* const* argv) {
  if (!a.starts_with("--") || a.find('=') != std::string_view::npos) return false;
  const Option* o = find_option(a.substr(2));
  return o && o->value_kind == "BOOL" && (i + 1 == argc || std::string_view(argv[i + 1]).starts_with("--"));
}

// `--section.key=` gives the key an empty value (e.g. `--data.valid=` turns evaluation off over a
// file's value), as `--section.key ''` does; Boost refuses an empty value after '=' on its own.
std::vector<std::string> with_empty_values(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (bare_bool_flag(a, i, argc, argv)) {
      args.emplace_back(std::string(a) + "=true");
    } else if (a.size() > 3 && a.starts_with("--") && a.ends_with('=') && a.find('=') == a.size() - 1) {
      args.emplace_back(a.substr(0, a.size() - 1));
      args.emplace_back();
    } else {
      args.emplace_back(a);
    }
  }
  return args;
}

po::variables_map parse_arguments(int argc, const char* const* argv) {
  po::options_description all;
  all.add(general_options()).add(key_options());
  po::variables_map vm;
  try {
    const int style = po::command_line_style::unix_style & ~po::command_line_style::allow_guessing;
    po::positional_options_description none;  // no positional arguments: a stray word is an error
    po::store(po::command_line_parser(with_empty_values(argc, argv)).options(all).positional(none).style(style).run(), vm);
  } catch (const po::error& e) {
    rethrow_po_error(e, "");
  }
  return vm;
}

// The file's values, each key once. A directory or unreadable path is named, not read as empty.
po::variables_map parse_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(cat("--config ", path, " is a directory: give the INI file (e.g. inputs/configs/cpu-tiny.ini)"));
  std::ifstream in(path);
  if (!in) {
    const bool exists = std::filesystem::exists(path, ec);
    throw ConfigError(cat("cannot read config file '", path, "': ",
                          exists ? cat("not readable (", std::strerror(errno), ")") : "no such file"));
  }
  po::variables_map vm;
  try {
    po::store(po::parse_config_file(in, key_options(), /*allow_unregistered=*/false), vm);
  } catch (const po::error& e) {
    rethrow_po_error(e, cat(" in config file '", path, "'"));
  }
  if (in.bad()) throw ConfigError(cat("cannot read config file '", path, "': ", std::strerror(errno)));
  for (const auto& [key, v] : vm)
    if (v.as<std::vector<std::string>>().size() > 1)
      throw ConfigError(cat("option '", key, "' given more than once in config file '", path, "'"));
  return vm;
}

// The values given for `key`, in the order they take effect (empty: not given).
std::vector<std::string> values_of(const po::variables_map& vm, const std::string& key) {
  return vm.count(key) ? vm[key].as<std::vector<std::string>>() : std::vector<std::string>{};
}
}  // namespace

CommandLine parse_command_line(int argc, const char* const* argv) {
  po::variables_map vm = parse_arguments(argc, argv);
  CommandLine cl;
  cl.help = vm.count("help") > 0;
  cl.help_markdown = vm.count("help-markdown") > 0;
  cl.print_config = vm.count("print-config") > 0;
  cl.plan = vm.count("plan") > 0;
  cl.preflight = vm.count("preflight") > 0;
  cl.force = vm.count("force") > 0;
  cl.version = vm.count("version") > 0;
  if (cl.help || cl.help_markdown || cl.version) return cl;
  po::variables_map file;
  if (vm.count("config")) {
    cl.config_file = vm["config"].as<std::string>();
    file = parse_config_file(cl.config_file);
  }
  // File first, then each command-line occurrence in order: every value is checked, the last stays.
  for (const Option& o : options()) {
    for (const std::string& text : values_of(file, o.key)) o.assign(cl.config, text);
    for (const std::string& text : values_of(vm, o.key)) o.assign(cl.config, text);
    if (file.count(o.key) || vm.count(o.key)) cl.given.insert(o.key);
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
      << general_options() << "\n";
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
