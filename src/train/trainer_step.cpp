// One optimizer step over the ZeRO engine (stages 0-3): forward and backward per micro-batch (or the
// pipeline's schedule), gradient reduction, clip, AdamW, each phase timed into the metrics window.
// Loss semantics: the loss is the mean token cross-entropy over the targets of the whole global batch
// that enter it (all of them, or the 1s of an instruction set's loss mask), so each such token's loss
// enters the backward pass with weight 1 / (their global count) on every rank and micro-batch, and the
// summed gradients over ranks equal those of one big batch, whatever the world size or accumulation.
#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/log.hpp"
#include "health/faults.hpp"
#include "optim/schedule.hpp"
#include "train/wiring.hpp"

namespace zt::train {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
}  // namespace

// The counters move with every step, skipped or not: a skipped step's batch still counts.
Trainer::StepResult Trainer::take_step(const data::StepBatch& batch) {
  const double blocked_before = blocked_ms();
  const StepResult r = train_step(batch);
  window_->phases.blocked_ms += blocked_ms() - blocked_before;
  ++step_;
  window_->add_step(r.trained_targets);
  tokens_ += static_cast<std::uint64_t>(derived_.tokens_per_step);
  last_loss_ = r.loss;
  return r;
}

Trainer::StepResult Trainer::train_step(const data::StepBatch& batch) {
  // fp16: the loss gradient is scaled up (loss_scaler.hpp) and the scale divided out of the norm and
  // the update; 1 otherwise.
  const double loss_scale = scaler_.scale();
  StepResult r;
  r.trained_targets = global_trained_targets(batch.trained_targets(), *train_tokens_);
  const double denominator = std::max(1.0, r.trained_targets);  // a step with no trained target: loss 0
  if (r.trained_targets == 0 && world_.is_root())
    log::warn(cat("step ", step_ + 1, ": the global batch holds no trained target (its loss mask is 0 everywhere): ",
                  "loss 0 and zero gradients; AdamW still applies its momentum and weight decay, as torch's ",
                  "optimizer.step() does after a zero loss. Fix: samples whose answers fall inside the windows"));
  const float dloss = static_cast<float>(loss_scale / denominator);
  std::vector<std::int32_t> inputs, targets;
  double loss_sum = 0;
  engine_->zero_grads();
  // Phases are timed on the host: exact for the synchronous CPU backend. Backward includes launching
  // the overlapped gradient reductions (and, at stages 2-3, draining them per micro-batch);
  // communication is what is left to wait for after the last backward, plus the loss all-reduce;
  // optimizer includes the stage 1-2 parameter all-gather.
  // On a device backend the phases end with a stream synchronisation so that they time the work, not
  // its launch (a handful per step: the launch queue drains only at phase ends).
  auto t = Clock::now();
  auto lap = [&t, this](double& into) {
    if (placement_.device == config::Device::kCuda) backend_->synchronize();
    into += ms_since(t);
    t = Clock::now();
  };
  if (pipeline_) {  // the micro-batches on the pipeline's schedule; reduced after the last (pipeline_stage.hpp)
    engine_->begin_backward(false);
    set_comm_context(cat("step ", step_ + 1, " pipeline"));
    health::hang_point(config_.debug, world_.rank(), config::HangPhase::kForward, step_ + 1);
    loss_sum = pipeline_->train(batch, *params_, *grads_, dloss, cat("step ", step_ + 1));
    lap(window_->phases.backward_ms);  // forward and backward interleave: timed as one phase
  }
  for (std::int64_t m = 0; !pipeline_ && m < batch.grad_accum; ++m) {
    batch.split(m, inputs, targets);
    set_comm_context(cat("step ", step_ + 1, " micro-batch ", m + 1, "/", batch.grad_accum));
    expect_access_order(true);
    t = Clock::now();
    health::hang_point(config_.debug, world_.rank(), config::HangPhase::kForward, step_ + 1);
    model_->set_segment_starts(batch.segments(m));  // data.document_mask, else null
    model_->set_positions(batch.positions(m));      // data.reset_positions, else null
    if (lora_) lora_->set_dropout(true, first_token(m));
    loss_sum += model_->forward(inputs.data(), targets.data(), *params_);
    health::slow_point(config_.debug, world_.rank(), ms_since(t));
    lap(window_->phases.forward_ms);
    engine_->begin_backward(m == batch.grad_accum - 1);
    health::hang_point(config_.debug, world_.rank(), config::HangPhase::kBackward, step_ + 1);
    model_->backward(*params_, *grads_, dloss);
    engine_->end_backward();
    lap(window_->phases.backward_ms);
  }
  set_comm_context(cat("step ", step_ + 1, " gradient reduction"));
  health::hang_point(config_.debug, world_.rank(), config::HangPhase::kReduce, step_ + 1);
  if (pipeline_) pipeline_->reduce_gradients(*engine_);
  r.grad_norm = engine_->finish_gradients();
  if (const ShardMap* map = trained_map())  // the whole model's norm from this rank's part (shard_map.hpp)
    r.grad_norm = grid_grad_norm(r.grad_norm, *engine_, grid_.tp > 1 ? grid_comms_.tp.get() : nullptr,
                                 map->replicated_ranges(), grid_.pp > 1 ? grid_comms_.pp.get() : nullptr,
                                 map->tied_copy_ranges());
  r.grad_norm /= loss_scale;
  // Every TP rank of a slice holds the slice's loss: summed over the DP group only. The pipeline's
  // last stage holds it (the others 0): summed over the pipeline first.
  if (pipeline_) loss_sum = grid_comms_.pp->all_reduce_value(loss_sum, dist::ReduceOp::kSum);
  r.loss = dp_comm().all_reduce_value(loss_sum, dist::ReduceOp::kSum) / denominator;
  lap(window_->phases.comm_ms);
  r.lr = optim::learning_rate(config_.optim, config_.train.max_steps, step_);
  r.loss_scale = loss_scale;
  // Every rank sees the same global norm, so every rank skips the same steps.
  r.skipped = !scaler_.update(std::isfinite(r.grad_norm));
  if (r.skipped) return r;
  set_comm_context(cat("step ", step_ + 1, " optimizer"));
  health::hang_point(config_.debug, world_.rank(), config::HangPhase::kOptimizer, step_ + 1);
  const int adam_step = static_cast<int>(step_ + 1 - scaler_.skipped_steps());  // as torch's GradScaler: skips do not count
  engine_->adamw_step(config_.optim, r.lr, adam_step, optim::clip_factor(r.grad_norm, config_.optim.grad_clip) / loss_scale);
  lap(window_->phases.optimizer_ms);
  return r;
}

// The targets entering the loss over all ranks: known without a loss mask (every target of every
// rank's windows), else summed over the ranks in one all-reduce (exact: integers below 2^53).
double Trainer::global_trained_targets(std::uint64_t here, const data::TokenSource& source) {
  if (!source.has_loss_mask()) return static_cast<double>(here) * static_cast<double>(derived_.dp_size);
  return dp_comm().all_reduce_value(static_cast<double>(here), dist::ReduceOp::kSum);  // TP ranks share a slice's
}

// The global index of micro-batch m's first token in this step (the window order's), for LoRA's dropout masks.
std::uint64_t Trainer::first_token(std::int64_t m) const {
  const data::BatchSlice slice{config_.train.global_batch, config_.train.micro_batch, derived_.dp_size, grid_.dp_rank()};
  return slice.window(static_cast<std::uint64_t>(step_), m, 0) * static_cast<std::uint64_t>(config_.model.seq_len);
}

void Trainer::expect_access_order(bool backward) {
  if (lora_) return lora_->expect_access_order(*engine_, backward);
  const int n_layer = static_cast<int>(config_.model.n_layer);
  const bool tied = table_.shape().tie_embeddings;
  engine_->expect_access_order(backward ? optim::forward_backward_order(n_layer, tied, engine_units_)
                                        : optim::forward_order(n_layer, tied, engine_units_));
}

}  // namespace zt::train
