// ztrain's command line: --config FILE (INI, [section] key=value) plus --section.key=value overrides,
// which win over the file; a key given twice on the command line takes the last value. Every problem
// is a ConfigError naming the key, the value and the fix.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "config/command_line.hpp"
#include "config/config.hpp"

namespace zt::config {

struct CommandLine {
  Config config;
  std::string config_file;
  std::set<std::string> given;  // keys set by the file or the command line (the rest are defaults)
  bool help = false;
  bool help_markdown = false;  // the configuration reference as a Markdown table (docs/guide/configuration.md)
  bool print_config = false;
  bool plan = false;
  bool preflight = false;
  bool force = false;
  bool version = false;
};

CommandLine parse_command_line(int argc, const char* const* argv);
// ztrain's flags besides the keys (--config, --plan, ...), as --help lists them.
const std::vector<cli::Flag>& general_flags();

// Checks between keys that need no knowledge of the world (divisibility, ordering, combinations).
void validate(const Config& config);

// parallel.pp_layers as blocks per (virtual) stage, checked against parallel.pp x parallel.vpp and
// model.n_layer (ConfigError naming the key, the values and the fix); empty when unset (balanced by cost).
std::vector<int> pipeline_layers(const Config& config);

// The configuration as INI that parse_command_line loads back (--config) to the same Config.
std::string to_ini(const Config& config);
// The inverse: a Config from such text (a checkpoint's state.json config_ini), every key the writing run
// resolved. A key this ztrain no longer knows is skipped; a key added since, or a value its ranges no
// longer take, keeps the default (the function the older run computed). Not validated: it was when written.
Config from_ini(const std::string& ini);

std::string help_text(const std::string& program);
std::string reference_markdown();

}  // namespace zt::config
