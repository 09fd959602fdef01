// The checkpoint's recorded configuration, as zckpt needs it (zckpt_inputs.hpp).
#include "apps/zckpt_inputs.hpp"

#include <filesystem>
#include <sstream>

#include "config/lora.hpp"
#include "config/parse.hpp"
#include "core/error.hpp"
#include "data/blend.hpp"
#include "data/shard_set.hpp"
#include "model/saved_model.hpp"

namespace zt::apps {
namespace fs = std::filesystem;

config::Config run_config_of(const ckpt::Checkpoint& c) { return model::checkpoint_config(c); }

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
  const config::Config config = run_config_of(c);
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
  if (!config.data.vocab.empty()) in.push_back({config.data.vocab, cat("the run's data.vocab=", config.data.vocab)});
  for (const auto& [key, value] : {std::pair{"train", config.data.train}, {"valid", config.data.valid}})
    for (const std::string& shard : shards_of(value, cat("data.", key)))
      in.push_back({shard, cat("a shard of the run's data.", key, "=", value)});
  if (!config.log.metrics.empty()) in.push_back({config.log.metrics, cat("the run's log.metrics=", config.log.metrics)});
  return in;
}

}  // namespace zt::apps
