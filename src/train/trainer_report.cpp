// What the loop reports between steps: the metrics line of a window of steps, the evaluation loss on
// data.valid, text samples; each with the interval that says when (log.every, log.eval_every, log.sample_every).
#include "train/trainer.hpp"

#include <algorithm>
#include <limits>

#include "core/log.hpp"
#include "io/json_text.hpp"
#include "model/cost.hpp"
#include "train/sampler.hpp"

namespace zt::train {
namespace {

// The straggler watch's verdict on the window (health/stragglers.hpp), into its metrics line.
void add_slowest_rank(StepMetrics& m, const health::WindowSummary& s, const std::string& host) {
  m.slowest_rank = s.slowest_rank;
  m.slowest_host = host;
  m.slowest_compute_ms = s.slowest_compute_ms, m.median_compute_ms = s.median_compute_ms;
  m.slowest_wait_ms = s.slowest_wait_ms, m.median_wait_ms = s.median_wait_ms;
  if (s.link) m.slowest_link_host = s.link->host, m.slowest_link_ms = s.link->slowest_ms, m.median_link_ms = s.link->median_ms;
}

}  // namespace

// Each batch's read is agreed on (one all-reduce of a flag) before its forward pass, so a bad chunk in
// data.valid on one rank stops every rank at the step boundary (checkpointed), not between collectives.
std::optional<double> Trainer::evaluate() {
  const std::int64_t batches = config_.log.eval_batches;
  data::WindowOrder order(valid_tokens_->n_tokens(), config_.model.seq_len, /*shuffle=*/false, 0,
                          valid_tokens_->packed_window() != 0);
  data::BatchSlice slice{config_.train.global_batch, config_.train.micro_batch, derived_.dp_size, grid_.dp_rank()};
  data::BatchLoader loader(valid_tokens_, order, slice, derived_.grad_accum, 0, 1,
                           data::DocumentViews{config_.data.document_mask, config_.data.reset_positions});
  std::vector<std::int32_t> inputs, targets;
  double loss_sum = 0;
  std::uint64_t targets_here = 0;
  if (lora_) lora_->set_dropout(false);
  set_comm_context(cat("evaluation after step ", step_));
  for (std::int64_t b = 0; b < batches; ++b) {
    std::optional<data::StepBatch> read;
    try {
      read = loader.next();
    } catch (const DataError& e) {
      data_error_ = e.what();
    }
    std::int32_t failed = read ? 0 : 1;
    agree_max(&failed, 1);
    if (failed != 0) return std::nullopt;
    const data::StepBatch& batch = *read;
    targets_here += batch.trained_targets();
    if (pipeline_) loss_sum += pipeline_->evaluate(batch, *params_, cat("evaluation after step ", step_));
    for (std::int64_t m = 0; !pipeline_ && m < batch.grad_accum; ++m) {
      batch.split(m, inputs, targets);
      expect_access_order(false);
      model_->set_segment_starts(batch.segments(m));
      model_->set_positions(batch.positions(m));
      loss_sum += model_->forward(inputs.data(), targets.data(), *params_);
    }
  }
  const double count = global_trained_targets(targets_here, *valid_tokens_);
  if (pipeline_) loss_sum = grid_comms_.pp->all_reduce_value(loss_sum, dist::ReduceOp::kSum);  // the last stage's
  const double sum = dp_comm().all_reduce_value(loss_sum, dist::ReduceOp::kSum);
  if (count > 0) return sum / count;
  // Windows of prompts only (an instruction set's long prompts, short answers): no mean to report. A 0
  // would read as a perfect model (and win a best-checkpoint choice); null says there was nothing.
  if (world_.is_root())
    log::warn(cat("evaluation after step ", step_, ": its ", batches, " batches of data.valid hold no trained target (the ",
                  "loss mask is 0 on every one): val_loss and val_ppl are null. Fix: raise log.eval_batches, or give ",
                  "data.valid samples whose answers fall inside the windows read"));
  return std::numeric_limits<double>::quiet_NaN();
}

// A metrics line every log.every steps, after the last step and after every skipped (fp16 overflow) step.
bool Trainer::log_due(const StepResult& r, std::int64_t last) const {
  return step_ % config_.log.every == 0 || step_ == last || r.skipped;
}

bool Trainer::eval_due() const {
  return (valid_tokens_ || answer_eval_) && config_.log.eval_every > 0 && step_ % config_.log.eval_every == 0;
}

// The answer evaluation's engine on the trainer's weights (a LoRA run's adapters applied, no dropout).
void Trainer::evaluate_answers() {
  gen::EngineOptions e = answer_eval_->engine_options(config_, dp_comm().size());
  e.tp_group = grid_comms_.tp.get();
  if (lora_) {
    lora_->set_dropout(false);
    e.lora = &lora_->attach_generation(gen::forward_rows(e));
  }
  set_comm_context(cat("answer evaluation after step ", step_));
  const std::unique_ptr<GenerationWeights> weights = generation_weights();  // before the ranks' decoding diverges
  const AnswerScores s = answer_eval_->run(*backend_, shard_table(), weights->params(), e, dp_comm(), grid_.dp_rank(), world_);
  if (metrics_) metrics_->answers(step_, s);
}

bool Trainer::sample_due(std::int64_t last) const {
  return config_.log.sample_every > 0 && (step_ % config_.log.sample_every == 0 || step_ == last);
}

void Trainer::log_step(const StepResult& r) {
  StepMetrics m;
  m.step = step_;
  m.loss = r.loss;
  m.lr = r.lr;
  m.grad_norm = r.grad_norm;
  m.tokens = tokens_;
  m.skipped = r.skipped;
  const MetricsWindow::Closed w =
      window_->close(m, loader_->wait_ms_total(), comm_bytes(), derived_.tokens_per_step, world_.size());
  const backend::MemoryStats memory = backend_->memory_stats();
  // Each the max over ranks, in one all-reduce (the GPUs' two readings are 0 on the CPU backend).
  std::vector<double> bytes = {static_cast<double>(memory.peak_bytes), static_cast<double>(memory.reserved_bytes),
                               static_cast<double>(memory.device_used_bytes)};
  comm_->all_reduce_values(bytes, dist::ReduceOp::kMax);
  m.mem_peak_bytes = static_cast<std::uint64_t>(bytes[0]);
  m.mem_predicted_bytes = predicted_peak_;
  if (placement_.device == config::Device::kCuda)
    m.mem_reserved_bytes = static_cast<std::uint64_t>(bytes[1]), m.mem_device_used_bytes = static_cast<std::uint64_t>(bytes[2]);
  if (scaler_.enabled()) m.loss_scale = r.loss_scale;
  if (pipeline_) {  // the window's share of waiting in transfers, averaged over the ranks (collective)
    const double run = pipeline_->run_ms() - pipeline_run_ms_, wait = pipeline_->wait_ms() - pipeline_wait_ms_;
    pipeline_run_ms_ = pipeline_->run_ms(), pipeline_wait_ms_ = pipeline_->wait_ms();
    m.pipeline_bubble = comm_->all_reduce_value(run > 0 ? wait / run : 0.0, dist::ReduceOp::kSum) / world_.size();
    m.pipeline_bubble_theory = pipeline_->bubble_theory();
  }
  if (placement_.device == config::Device::kCuda && config_.train.precision != config::Precision::kFp32)  // MFU: 16-bit GPU runs
    m.mfu = model::mfu_flops_per_token(table_.shape(), table_.n_params_for_flops(),
                                       lora_ ? lora_->adapter_table().n_params_real() : 0) *
            m.tokens_per_s_per_rank / model::kPeakBf16Flops;
  // compute: the phases less the collectives' waits
  const double compute = m.forward_ms + m.backward_ms + m.comm_ms + m.optimizer_ms - w.blocked_ms_per_step;
  if (const auto s = stragglers_->observe(step_ - w.steps + 1, step_, compute, w.blocked_ms_per_step + m.data_wait_ms))
    add_slowest_rank(m, *s, stragglers_->host(s->slowest_rank));
  if (gpu_metrics_) {  // max over ranks: the hottest, hungriest device of the job
    const health::GpuReading g = gpu_monitor_.available() ? gpu_monitor_.read() : health::GpuReading{};
    m.gpu_power_w = comm_->all_reduce_value(g.power_w, dist::ReduceOp::kMax);
    m.gpu_temp_c = comm_->all_reduce_value(g.temp_c, dist::ReduceOp::kMax);
  }
  if (metrics_ && blend_.corpora.size() > 1)
    m.corpus_windows = blend_.order->consumed(static_cast<std::uint64_t>(step_ * config_.train.global_batch));
  if (metrics_) metrics_->step(m);
}

// A text sample on every rank (ZeRO-3 gathers need all of them); rank 0 logs it and writes it to the
// metrics file as {"step": S, "sample": "..."}.
void Trainer::sample() {
  SampleOptions o;
  o.n_tokens = static_cast<int>(config_.log.sample_tokens);
  o.seed = config_.train.seed;
  o.step = static_cast<std::uint64_t>(step_);
  set_comm_context(cat("text sample after step ", step_));
  std::string text;
  if (pipeline_) {  // the window through the stages; each rank gets the last stage's logits
    const NextLogits next = [&](const std::int32_t* window, int n) {
      return pipeline_->next_token_logits(window, n, *params_, cat("text sample after step ", step_));
    };
    text = sample_text(next, table_.shape(), static_cast<int>(config_.train.micro_batch), *tokenizer_,
                       config_.log.sample_prompt, o);
  } else {
    model_->set_segment_starts(nullptr);  // one prompt: no document mask
    if (lora_) lora_->set_dropout(false);
    text = sample_text(*model_, *params_, *tokenizer_, config_.log.sample_prompt, o, [&] { expect_access_order(false); });
  }
  log::info(cat("step ", step_, " | sample: ", text));
  if (metrics_) metrics_->event(cat("{\"step\": ", step_, ", \"sample\": ", io::json_string(text), "}"));
}

}  // namespace zt::train
