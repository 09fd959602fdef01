// parallel.pp > 1 in the trainer: this rank's pipeline stage. It holds the stage's parameter table
// (model/stage_split.hpp: its blocks, the embedding on the first stage, the final norm, head and loss
// on the last; a tied head's copy of the token embedding there too), one stage model per micro-batch
// that can be in flight on it (1F1B: min(pp - stage, micro-batches) activation sets, each its own
// arena: the same Gpt2/Llama code as the whole model; under parallel.tp > 1 the TP models on the TP
// cut of the rank's table, stage_split.hpp's part_table), and runs a step's micro-batches on the 1F1B
// schedule (model/pipeline_schedule.hpp) over the pipeline group's send/recv: activations forward,
// their gradients backward, sends in flight while the stage computes, receives waited for. Under the
// interleaved schedule (parallel.vpp > 1) the rank holds vpp model chunks, each with the slots its
// in-flight micro-batches need, and every transfer names its message stream (kind and sending chunk).
//
// Gradients: the micro-batches accumulate into the ZeRO engine's full gradient buffer without being
// reduced (ZeRO stages 0-1; stages 2-3 reduce per micro-batch and are refused with pp: see
// check_pipeline_config); after the last one, the tied embedding's two copies are summed over the
// embedding group (under TP each rank's vocabulary shard of them), then every unit is reduced over the
// DP group; the gradient norm is the whole model's (shard_map.hpp's grid_grad_norm: the stages' squares
// summed over the pipeline, the tied copy and TP-replicated parameters counted once).
// LoRA (set_lora): the stage models run on the rank's part of the frozen base and apply the adapters of
// its blocks, which are what the engine trains and reduces; the tied head's copies are not summed.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "data/batch_loader.hpp"
#include "dist/communicator.hpp"
#include "dist/grid.hpp"
#include "model/model.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"
#include "optim/zero/engine.hpp"
#include "model/pipeline_schedule.hpp"
#include "model/stage_split.hpp"

namespace zt::train {

class PipelineStage {
 public:
  // global: the whole model's table; vpp: model chunks per rank (1: 1F1B); micro_batches: the step's
  // (grad_accum); models: how each chunk's models run (their stage is the chunk's; tp_group: this rank's
  // TP group when grid.tp > 1, split_grid's, which must outlive the stage); blocks: each virtual stage's
  // block count (parallel.pp_layers; empty: balanced by cost).
  PipelineStage(backend::Backend& backend, const model::ParamTable& global, const dist::Grid& grid, int vpp,
                std::int64_t micro_batches, const model::ModelOptions& models, const std::vector<int>& blocks = {});

  const model::ParamTable& table() const { return table_; }  // this rank's parameters (the engine's)
  const model::PipelineCut& cut() const { return cut_; }
  std::string split() const { return cut_.describe(table_.shape()); }  // every stage's blocks, for the start-up log
  std::size_t activation_bytes() const;

  // The pipeline group (one rank per stage, in stage order) and, for a tied head, the embedding group
  // (first and last stage): from dist::split_grid.
  void connect(dist::Communicator& pipeline, dist::Communicator* embedding);
  // A LoRA run: every stage model applies `lora`, whose table `adapters` (this rank's part) is what the
  // engine trains; first_row(m): global token of micro-batch m's first window this step, which keys
  // its dropout masks in both its passes (set before each op, since 1F1B interleaves micro-batches).
  void set_lora(model::Lora& lora, const model::ParamTable& adapters, std::function<std::uint64_t(int micro)> first_row);

  // One step's forward and backward passes; returns the sum of this stage's token losses (the last
  // stage's; 0 elsewhere). context: "step N" for the watchdog messages.
  double train(const data::StepBatch& batch, model::ParamSource& params, model::GradSink& grads, float dloss,
               const std::string& context);
  // Forward passes only (evaluation): the summed token losses on the last stage, 0 elsewhere.
  double evaluate(const data::StepBatch& batch, model::ParamSource& params, const std::string& context);
  // For text samples: one window of tokens (micro_batch x seq_len, as the models take) through the
  // pipeline; every rank of it gets the logits [V] at position n - 1, computed on the last stage and
  // summed over the pipeline group (the others add zeros). Collective over the pipeline.
  std::vector<float> next_token_logits(const std::int32_t* window, int n, model::ParamSource& params,
                                       const std::string& context);

  // After train(): the tied embedding's copies summed (not with LoRA: the base is frozen), then every
  // unit's gradients reduced over the DP group (the engine's). Collective over the embedding and DP groups.
  void reduce_gradients(optim::ZeroEngine& engine);

  // Milliseconds since construction spent in train() and, within it, waiting in transfers (the
  // bubble's idle time plus the transfers themselves); with equal stages the ratio tends to the theory's.
  double run_ms() const { return run_ms_; }
  double wait_ms() const { return wait_ms_; }
  double bubble_theory() const { return model::bubble_fraction(grid_.pp, static_cast<int>(micro_batches_), cut_.vpp); }

 private:
  using PipeOp = model::PipeOp;
  struct Slot {  // one model chunk's activation set for one in-flight micro-batch
    int chunk, index;
    bool operator==(const Slot&) const = default;
  };
  struct Pending {  // a send in flight from a slot's buffer
    Slot slot;
    std::unique_ptr<dist::Work> work;
  };
  std::unique_ptr<model::Model> new_model(const model::Stage& chunk);  // one activation set's model
  Slot slot_of(const PipeOp& op) const;
  model::Model& model(Slot s) { return *models_[static_cast<std::size_t>(s.chunk)][static_cast<std::size_t>(s.index)]; }
  // One op: its slot's earlier sends waited for, its input received, pass run on the slot's model (its
  // result returned), its output sent; context and detail name it for the watchdog.
  double transfer_around(const PipeOp& op, const std::string& context, const std::string& detail,
                         const std::function<double(model::Model&)>& pass);
  // A training or evaluation op (batch's micro-batch; grads null: forward only).
  double run(const PipeOp& op, const data::StepBatch& batch, model::ParamSource& params, model::GradSink* grads,
             float dloss, const std::string& context);
  void receive(const PipeOp& op, model::Model& m);
  void send(const PipeOp& op, Slot slot, model::Model& m);
  void wait_sends(Slot slot);  // before the slot's buffers are reused: its sends have left
  void wait_all_sends();

  backend::Backend& be_;
  dist::Grid grid_;
  model::PipelineCut cut_;
  model::ParamTable table_;
  std::int64_t micro_batches_;
  model::ModelOptions models_options_;  // every chunk's models but their stage
  std::vector<PipeOp> ops_;  // this rank's step (model/pipeline_schedule.hpp)
  std::vector<std::vector<std::unique_ptr<model::Model>>> models_;  // [chunk][slot]
  dist::Communicator* pipeline_ = nullptr;
  dist::Communicator* embedding_ = nullptr;
  std::vector<Pending> sends_;
  const model::ParamTable* trained_ = &table_;  // the engine's table: table_, or a LoRA run's adapters
  model::Lora* lora_ = nullptr;
  std::function<std::uint64_t(int)> lora_first_row_;
  double run_ms_ = 0, wait_ms_ = 0;
  void timed_wait(dist::Work& work);  // counted into wait_ms_
  std::vector<std::int32_t> inputs_, targets_;
};

}  // namespace zt::train
