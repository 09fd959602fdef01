// The checkpoint's recorded configuration, as zckpt needs it (zckpt_inputs.hpp).
#include "apps/zckpt_inputs.hpp"

#include <filesystem>
#include <sstream>

#include "config/lora.hpp"
#include "config/parse.hpp"
#include "core/error.hpp"
#include "data/blend.hpp"
#include "data/shard_set.hpp"

namespace zt::apps {
namespace fs = std::filesystem;

config::ModelConfig model_config_of(const ckpt::Checkpoint& c) {
  std::istringstream ini(c.state().config_ini);
  std::vector<std::string> args{"zckpt"};
  std::string line, section;
  while (std::getline(ini, line)) {
    if (line.starts_with("[")) section = line.substr(1, line.find(']') - 1);
    const std::size_t eq = line.find(" = ");
    if (section == "model" && eq != std::string::npos)
      args.push_back(cat("--model.", line.substr(0, eq), "=", line.substr(eq + 3)));
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return config::parse_command_line(static_cast<int>(argv.size()), argv.data()).config.model;
}

std::string ini_value(const ckpt::Checkpoint& c, const std::string& section, const std::string& key) {
  std::istringstream ini(c.state().config_ini);
  std::string line, in;
  while (std::getline(ini, line)) {
    if (line.starts_with("[")) in = line.substr(1, line.find(']') - 1);
    if (in == section && line.starts_with(key + " = ")) return line.substr(key.size() + 3);
  }
  return "";
}

config::Config lora_config_of(const ckpt::Checkpoint& c) {
  config::Config config;
  config.model = model_config_of(c);
  config.init.from = ini_value(c, "init", "from");
  const std::string rank = ini_value(c, "lora", "rank");
  config.lora.rank = rank.empty() ? 0 : std::stoll(rank);
  if (config.lora.rank == 0) return config;
  config.lora.alpha = std::stod(ini_value(c, "lora", "alpha"));
  config.lora.rslora = ini_value(c, "lora", "rslora") == "true";
  config.lora.targets = ini_value(c, "lora", "targets");
  const std::string dropout = ini_value(c, "lora", "dropout");  // absent before lora.dropout existed
  config.lora.dropout = dropout.empty() ? 0.0 : std::stod(dropout);
  return config;
}

namespace {

// The shards a recorded data.train (a blend too) or data.valid matches now; none when nothing matches.
std::vector<std::string> shards_of(const std::string& value, const std::string& key) {
  std::vector<std::string> files;
  if (value.empty()) return files;
  try {
    for (const data::CorpusSpec& corpus : data::parse_blend(value, key))
      for (std::string& f : data::expand_globs(corpus.glob, key)) files.push_back(std::move(f));
  } catch (const Error&) {  // moved or deleted since: nothing of it left to protect
  }
  return files;
}

}  // namespace

std::vector<io::Guarded> inputs_of(const ckpt::Checkpoint& c) {
  std::vector<io::Guarded> in{{c.dir(), "the checkpoint it reads"}};
  const config::Config config = lora_config_of(c);
  const std::string from = config.init.from;
  if (!from.empty()) {
    in.push_back({from, cat("the run's init.from=", from)});
    std::error_code ec;
    const fs::path beside = fs::path(from).parent_path() / "config.json";
    if (fs::is_regular_file(from, ec) && fs::exists(beside, ec)) in.push_back({beside, cat("the config.json of init.from=", from)});
  }
  if (config.lora.rank > 0) {
    try {
      const std::string base = config::lora_base_path(config);
      if (!base.empty() && base != from) in.push_back({base, cat("the LoRA run's base ", base, " (named by ", from, ")")});
    } catch (const Error&) {  // the adapter directory is gone: the merge says so; nothing there to protect
    }
  }
  for (const char* key : {"vocab", "train", "valid"}) {
    const std::string value = ini_value(c, "data", key);
    if (std::string(key) == "vocab") {
      if (!value.empty()) in.push_back({value, cat("the run's data.vocab=", value)});
      continue;
    }
    for (const std::string& shard : shards_of(value, cat("data.", key)))
      in.push_back({shard, cat("a shard of the run's data.", key, "=", value)});
  }
  if (const std::string metrics = ini_value(c, "log", "metrics"); !metrics.empty())
    in.push_back({metrics, cat("the run's log.metrics=", metrics)});
  return in;
}

}  // namespace zt::apps
