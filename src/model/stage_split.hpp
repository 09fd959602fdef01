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

#include "model/cost.hpp"
#include "model/model.hpp"
#include "model/param_table.hpp"

namespace zt::model {

// A stage's FLOPs a token (cost.hpp's token_flops): its blocks, plus the embedding on the first and the head on the last.
double stage_flops(const GptShape& shape, const Stage& stage, Recompute recompute = Recompute::kNone);

// The blocks of each of `stages` consecutive stages, balanced by cost (token_flops, no recompute): the
// largest stage cost is the least any cut reaches; among such cuts the one with the least sum of
// squared stage costs (the most even); then more blocks on the earlier stages (the even cut's rule).
// Every stage keeps at least one block. Why not L / stages each: the last stage also runs the LM head,
// which costs as much as several blocks when the vocabulary is large (GPT-2 124M: ~4.5 blocks, Llama 3
// 8B at T 8192: ~1.8), and a pipeline runs at its slowest stage's pace. Megatron-LM asks the user for
// the first and last stage's blocks (--decoder-first/last-pipeline-num-layers) or counts the embedding
// and loss as a layer each (--account-for-embedding/loss-in-pipeline-split); torchtitan weighs its
// input and output modules as layers when it cuts. Here the cost decides, with no flag. Memory is not
// balanced: the first 1F1B stage holds the most micro-batches in flight, and moving blocks onto it adds
// to its activations (the memory plan reports the busiest stage; parallel.pp_layers gives the counts by
// hand, PipelineCut::make's `blocks`).
// Throws ConfigError when there are fewer blocks than stages.
std::vector<Stage> split_blocks(const GptShape& shape, int stages);

struct PipelineCut {
  int pp = 1, vpp = 1;
  std::vector<Stage> virtual_stages;  // pp x vpp, in pipeline order: chunk c of rank r is c * pp + r

  // Throws ConfigError naming parallel.pp and parallel.vpp when the model has fewer blocks than stages.
  // blocks: each virtual stage's block count (parallel.pp_layers, checked by config::pipeline_layers);
  // empty: split_blocks, and with vpp > 1 single blocks then moved across the virtual stages' boundaries
  // while that lowers the busiest rank's total over its chunks (which paces the interleaved steady
  // state; GPT-2 124M at pp 2 x vpp 2: 3,4,4,1 -> 4,3,4,1, the busiest rank 9.5 -> 8.5 blocks' worth).
  static PipelineCut make(const GptShape& shape, int pp, int vpp = 1, const std::vector<int>& blocks = {});
  std::vector<Stage> chunks(int rank) const;  // rank's model chunks, in chunk order
  // Whether `rank` holds the token embedding as its tied LM head's weight (the last virtual stage's
  // rank of a tied model, when it is not also the first's).
  bool holds_tied_head_copy(const GptShape& shape, int rank) const;
  // The table of rank's parameters (see above); the global table is copied from.
  ParamTable table(const ParamTable& global, int rank) const;
  // "stage 0: embedding + blocks 0-7; stage 1: blocks 8-11 + head and loss" (the start-up log line);
  // with vpp > 1 each rank's chunks: "rank 0: embedding + blocks 0-2, blocks 6-8; rank 1: ...".
  std::string describe(const GptShape& shape) const;
  // One rank's part of that line: "embedding + blocks 0-5" (its chunks, comma-separated).
  std::string describe_rank(const GptShape& shape, int rank) const;
  // A token's forward + backward FLOPs on `rank` (its chunks' stage_flops summed).
  double rank_flops(const GptShape& shape, int rank, Recompute recompute = Recompute::kNone) const;
  // The rank with the most FLOPs (the lowest on a tie), the one that paces the pipeline.
  int busiest_rank(const GptShape& shape, Recompute recompute = Recompute::kNone) const;
  // "forward + backward per token: stage 0 415 MFLOP, stage 1 440 MFLOP" (ranks under vpp > 1; GFLOP
  // from 1e9 up).
  std::string describe_costs(const GptShape& shape) const;
};

// The table of the part of the model pipeline rank `pp_rank` of a pp x tp grid holds: the TP cut
// (tp_split.hpp) of its table under the pipeline cut (all its chunks), each cut skipped at degree 1.
// Every TP rank of a stage has the same table; a tied head's copy on the last stage is the same
// vocabulary shard the first stage holds.
ParamTable part_table(const ParamTable& global, const PipelineCut& cut, int pp_rank, int tp);

// The same for a LoRA adapter table (lora.hpp: unit l = block l, no embedding, no tied copy): the
// adapters of the blocks pipeline rank `pp_rank` runs, unit numbers kept (others empty), then their TP cut.
ParamTable adapter_part_table(const ParamTable& adapters, const PipelineCut& cut, int pp_rank, int tp);

}  // namespace zt::model
