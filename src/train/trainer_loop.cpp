// The training loop: step after step until the last, with the step boundary's agreements between ranks
// (stop, checkpoint, data errors) and how a run ends (done, requeue, unreadable data).
#include "train/trainer.hpp"

#include <chrono>
#include <cmath>

#include "core/log.hpp"
#include "health/faults.hpp"
#include "io/json_text.hpp"
#include "train/signals.hpp"

namespace zt::train {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

// A deadline or communication error: the ranks compare their last collectives (health/hang_notes.hpp)
// before the boundary ends the job.
int Trainer::run() {
  return hang_notes_->reporting([this] { return config_.rl.enabled() ? rl_loop() : train_loop(); });
}

int Trainer::train_loop() {
  const std::int64_t last = config_.train.stop_at_step > 0 ? config_.train.stop_at_step : config_.train.max_steps;
  if (step_ >= last) {
    log::info(cat("nothing to train: the run is at step ", step_, " and stops at step ", last,
                  " (train.max_steps / train.stop_at_step)"));
    return record_exit(kExitOk, "nothing to train");
  }
  const std::int64_t first = step_ + 1;  // this invocation's first step (after a resume: not step 1)
  window_.emplace(loader_->wait_ms_total(), comm_bytes());
  std::optional<data::StepBatch> batch = read_next_batch();
  if (data_error_anywhere()) return stop_on_data_error();  // before this invocation's first step
  if (stopped_before_first_step()) return record_exit(kExitRequeue, stop_reason());
  while (step_ < last) {
    const StepResult r = take_step(*batch);
    if (!std::isfinite(r.loss) && !r.skipped) {  // fp16: an overflowing step is the scaler's business
      checkpointer_->commit_before_failing("before stopping");  // every rank sees the same all-reduced loss
      throw Error(cat("the loss became ", r.loss, " at step ", step_, ": lower optim.lr or raise optim.warmup_steps"));
    }
    if (step_ == first) {  // start-up is over: the tight deadline from now on (dist/deadline.hpp)
      set_comm_timeout(config_.dist.timeout_s);
      world_.set_timeout(config_.dist.timeout_s);
    }
    if (r.skipped)
      log::warn(cat("step ", step_, ": fp16 gradients overflowed at loss scale ", io::json_number(r.loss_scale),
                    "; the update is skipped (the batch still counts), scale now ", io::json_number(scaler_.scale())));
    if (log_due(r, last)) log_step(r);
    if (eval_due() && valid_tokens_) {
      const std::optional<double> val = evaluate();
      if (metrics_ && val) metrics_->eval(step_, *val);
    }
    if (eval_due() && answer_eval_) evaluate_answers();
    if (sample_due(last)) sample();
    health::inject_faults(config_.debug, world_.rank(), step_);
    if (step_ < last) batch = read_next_batch();  // before the boundary, which agrees on a data error
    if (at_step_boundary(last)) {
      checkpointer_->finish();
      if (data_failed_) return stop_on_data_error();
      log::info(stopped_line("step"));
      return record_exit(kExitRequeue, stop_reason());
    }
  }
  checkpointer_->finish();
  if (data_failed_) return stop_on_data_error();  // the last step's evaluation: trained, but not done
  log::info(cat("done: ", step_, " steps, final loss ", io::json_number(last_loss_)));
  return record_exit(kExitOk, "done");
}

// The job scripts read the exit code here: mpirun reports 1 after a SIGTERM whatever the ranks return.
int Trainer::record_exit(int code, const std::string& reason) {
  if (metrics_)
    metrics_->event(cat("{\"event\": \"exit\", \"step\": ", step_, ", \"code\": ", code, ", \"reason\": ",
                        io::json_string(reason), "}"));
  return code;
}

std::optional<data::StepBatch> Trainer::read_next_batch() {
  try {
    return loader_->next();
  } catch (const DataError& e) {
    data_error_ = e.what();
    return std::nullopt;
  }
}

// A stop signal during start-up (while rank 0 verified the checkpoint, while the model loaded): every rank
// agrees before step 1 and the run ends there with 75, its resume point unchanged (no step was trained,
// so there is nothing to save). Not train.time_limit_min, which a long start-up may already have spent:
// it stops at the first boundary, after a step, so that a requeued job always makes progress.
bool Trainer::stopped_before_first_step() {
  std::int32_t flag = stop_signal_received() != 0 ? 1 : 0;
  set_comm_context(cat("step ", step_ + 1, " start (agreeing on a stop requested during start-up)"));
  agree_max(&flag, 1);
  if (flag != 0)
    log::info(cat("stopped before step ", step_ + 1, " on ", stop_reason(), " during start-up: exit ", kExitRequeue,
                  " (requeue; ", step_ > 0 ? cat("ckpt.resume=auto continues from step ", step_) : std::string("nothing trained yet"),
                  ")"));
  return flag != 0;
}

bool Trainer::data_error_anywhere() {
  std::int32_t flag = data_error_.empty() ? 0 : 1;
  set_comm_context(cat("step ", step_ + 1, " start (agreeing that every rank read its first batch)"));
  agree_max(&flag, 1);
  return flag != 0;
}

// comm_'s collectives read and write device memory (NCCL takes device pointers; the host-staged MPI
// path copies from the device), so host flags travel through a small device buffer of this rank's own.
void Trainer::agree_max(std::int32_t* flags, std::size_t n) {
  std::vector<double> values(flags, flags + n);  // exact: small integers
  comm_->all_reduce_values(values, dist::ReduceOp::kMax);
  for (std::size_t i = 0; i < n; ++i) flags[i] = static_cast<std::int32_t>(values[i]);
}

// Every rank gets here together (the failure was agreed on), so the gather is no per-rank collective.
// The checkpoint of the last completed step is already committed (at_step_boundary saved it).
int Trainer::stop_on_data_error() {
  const std::vector<std::string> errors = world_.gather_to_root(data_error_);
  for (std::size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) log::error(cat("rank ", r, ": ", errors[r]));
  const std::string kept = step_ > 0 ? cat("the state after step ", step_, " is checkpointed (", config_.ckpt.dir,
                                           "; a rerun with ckpt.resume=auto continues from it)")
                                     : std::string("no step was trained");
  if (world_.is_root())  // once, after the ranks' errors it refers to
    log::error(cat("stopped after step ", step_, " on unreadable data (above); ", kept,
                   ": replace the shard, then rerun; exit ", kExitRuntime));
  return kExitRuntime;
}

bool Trainer::time_is_up() const {
  const double limit_min = config_.train.time_limit_min;
  return limit_min > 0 && std::chrono::duration<double>(Clock::now() - started_).count() >= limit_min * 60;
}

bool Trainer::stop_requested_here() const { return stop_signal_received() != 0 || time_is_up(); }

std::string Trainer::stop_reason() const {
  if (const int sig = stop_signal_received()) return signal_name(sig);
  if (time_is_up()) return cat("train.time_limit_min=", config_.train.time_limit_min);
  return "a stop request on another rank";
}

// One all-reduce (max) per step agrees on three flags over all ranks: a stop requested on any rank (a
// signal may reach only some), a background checkpoint write still running on any rank (the
// commit needs every rank's files), and a next batch that some rank cannot read (a corrupt chunk is
// found by the rank whose windows touch it): that stops every rank here, with a checkpoint.
bool Trainer::at_step_boundary(std::int64_t last) {
  std::int32_t flags[3] = {stop_requested_here() ? 1 : 0, checkpointer_->idle() ? 0 : 1, data_error_.empty() ? 0 : 1};
  set_comm_context(cat("step ", step_ + 1, " start (agreeing on stop and checkpoint after step ", step_, ")"));
  if (!health::skip_collective(config_.debug, world_.rank(), step_))  // TEST ONLY: a skipped collective
    agree_max(flags, 3);
  if (flags[1] == 0) checkpointer_->finish();  // commits a finished background write, if any
  data_failed_ = flags[2] != 0;
  const bool stop = (flags[0] != 0 || data_failed_) && step_ < last;
  if (!stop && checkpointer_->due(step_, last)) {
    set_comm_context(cat("the checkpoint of step ", step_));
    checkpointer_->save(train_state());
    if (config_.ckpt.async) background_save_ = step_;
    // A signal during that save: stop right after it (one more agreement; the checkpoint is this step's),
    // rather than train a step and save again inside the launcher's grace before its SIGKILL.
    std::int32_t late = stop_requested_here() ? 1 : 0;
    set_comm_context(cat("step ", step_ + 1, " start (after the save of step ", step_, ": agreeing on any stop requested during it)"));
    agree_max(&late, 1);
    return late != 0 && step_ < last;
  }
  // A stop request during a background write (ckpt.async) is seen here, a step later: that write (of the
  // previous step) is what the stop keeps, as a synchronous save's stop keeps its own, rather than a
  // second full write inside the launcher's grace before its SIGKILL. The step trained meanwhile is
  // trained again on resume.
  kept_background_save_ = stop && !data_failed_ && background_save_ == step_ - 1;
  if (stop && !kept_background_save_) {
    set_comm_context(cat("the checkpoint of step ", step_, " before stopping"));
    checkpointer_->save(train_state());
  }
  return stop;
}

std::string Trainer::stopped_line(const char* unit) const {
  const std::string requeue = cat("exit ", kExitRequeue, " (requeue; ckpt.resume=auto continues from ");
  if (kept_background_save_)
    return cat("stopped after ", unit, " ", step_, " on ", stop_reason(), ": the checkpoint is ", unit, " ", step_ - 1,
               "'s, written in the background during ", unit, " ", step_, " (no second save in the launcher's grace); ",
               requeue, "there, ", unit, " ", step_, " trained again)");
  return cat("stopped after ", unit, " ", step_, " on ", stop_reason(), ", checkpointed: ", requeue, "here)");
}

}  // namespace zt::train
