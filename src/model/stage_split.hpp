// Pipeline parallelism's cut of the model (parallel.pp): which blocks each stage runs, and the parameter
// table of one stage. Stages get L / pp blocks each, the first L % pp stages one more (the last stage
// also runs the LM head and the loss). A stage's table holds its own parameters only, in the global
// table's order and unit numbers (units of other stages are empty), so the model code indexes units as
// it does for the whole model: unit 0 (the embedding) on the first stage, blocks 1+l of its range, unit
// L+1 (final norm and an untied head) on the last. A tied head (GPT-2, tied Llama) reads the token
// embedding, so the last stage holds a copy of it too, as unit 0 (Megatron's embedding group: the two
// copies' gradients are summed over the first and last stage every step, so they stay equal).
#pragma once

#include <string>
#include <vector>

#include "model/model.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// The blocks of each of `stages` stages. Throws ConfigError when there are fewer blocks than stages.
std::vector<Stage> split_blocks(int n_layer, int stages);

// "stage 0: embedding + blocks 0-5; stage 1: blocks 6-11 + head and loss" (the start-up log line).
std::string describe_split(const std::vector<Stage>& stages, int n_layer, bool tied_head);

// Whether a stage of a pipeline of `stages` holds the token embedding as its tied LM head's weight
// (the last stage of a tied model, when it is not also the first).
bool holds_tied_head_copy(const GptShape& shape, const Stage& stage, int stages);

// The table of one stage's parameters (see above); the global table must outlive nothing: it is copied.
ParamTable stage_table(const ParamTable& global, const Stage& stage, int stages);

}  // namespace zt::model
