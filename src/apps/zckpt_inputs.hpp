// What zckpt reads from a checkpoint's recorded configuration (state.json keeps the run's resolved INI):
// the run's model and LoRA keys, and the paths the run read or wrote, which zckpt's outputs may never
// touch (docs/INTERFACE.md "zckpt and the checkpoint": the output rule).
#pragma once

#include <string>
#include <vector>

#include "ckpt/reader.hpp"
#include "config/config.hpp"
#include "io/staged_output.hpp"

namespace zt::apps {

// The resolved configuration of the run that wrote checkpoint c (its model, LoRA, init, data and log
// keys; rank 0: not a LoRA checkpoint). Llama's RoPE and norm settings are not in the manifest (they do
// not change the parameter table); config.json needs them from here.
config::Config run_config_of(const ckpt::Checkpoint& c);

// What an output of a command on c may not be, lie inside or hold: the checkpoint itself, its run's
// init.from (and the config.json beside a file), a LoRA run's base (a PEFT directory's
// base_model_name_or_path), data.vocab, the data shards, log.metrics. Paths the config records
// relative are taken from the current directory, as the merge reloads the base.
std::vector<io::Guarded> inputs_of(const ckpt::Checkpoint& c);

}  // namespace zt::apps
