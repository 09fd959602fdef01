// Pipeline parallelism's cut of the model (parallel.pp, parallel.vpp): which blocks each (virtual)
// stage runs, which stages each rank holds, and the parameter table of one rank. The blocks are cut
// into pp x vpp virtual stages in pipeline order (split_blocks); rank r runs virtual stages r, r + pp,
// ..., its vpp model chunks (Megatron-LM's interleaving; vpp = 1: one stage per rank). The first
// virtual stage also runs the embedding, the last the final norm, LM head and loss.
//
// A rank's table holds its own parameters only, in the global table's order and unit numbers (units of
// other ranks are empty), so the model code indexes units as it does for the whole model: unit 0 (the
// embedding) on rank 0, blocks 1+l of its chunks, unit L+1 (final norm and an untied head) on the rank
// of the last virtual stage. A tied head (GPT-2, tied Llama) reads the token embedding, so that rank
// holds a copy of it too, as unit 0 (Megatron's embedding group: the two copies' gradients are summed
// over the first and last stage every step, so they stay equal).
#pragma once

#include <string>
#include <vector>

#include "model/model.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// The blocks of each of `stages` consecutive stages. Throws ConfigError when there are fewer blocks
// than stages.
std::vector<Stage> split_blocks(const GptShape& shape, int stages);

struct PipelineCut {
  int pp = 1, vpp = 1;
  std::vector<Stage> virtual_stages;  // pp x vpp, in pipeline order: chunk c of rank r is c * pp + r

  // Throws ConfigError naming parallel.pp and parallel.vpp when the model has fewer blocks than stages.
  static PipelineCut make(const GptShape& shape, int pp, int vpp = 1);
  std::vector<Stage> chunks(int rank) const;  // rank's model chunks, in chunk order
  // Whether `rank` holds the token embedding as its tied LM head's weight (the last virtual stage's
  // rank of a tied model, when it is not also the first's).
  bool holds_tied_head_copy(const GptShape& shape, int rank) const;
  // The table of rank's parameters (see above); the global table is copied from.
  ParamTable table(const ParamTable& global, int rank) const;
  // "stage 0: embedding + blocks 0-5; stage 1: blocks 6-11 + head and loss" (the start-up log line);
  // with vpp > 1 each rank's chunks: "rank 0: embedding + blocks 0-2, blocks 6-8; rank 1: ...".
  std::string describe(const GptShape& shape) const;
};

}  // namespace zt::model
