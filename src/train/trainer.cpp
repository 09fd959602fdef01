// One rank's training loop over the ZeRO engine (stages 0-3).
// Loss semantics: the loss is the mean token cross-entropy over the targets of the whole global batch
// that enter it (all of them, or the 1s of an instruction set's loss mask), so each such token's loss
// enters the backward pass with weight 1 / (their global count) on every rank and micro-batch, and the
// summed gradients over ranks equal those of one big batch, whatever the world size or accumulation.
#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/version.hpp"
#include "core/log.hpp"
#include "data/shard_set.hpp"
#include "dist/deadline.hpp"
#include "tok/vocab.hpp"
#include "model/init.hpp"
#include "model/hf_dir.hpp"
#include "optim/schedule.hpp"
#include "plan/memory_plan.hpp"
#include "train/data_check.hpp"
#include "train/faults.hpp"
#include "train/recording_communicator.hpp"
#include "train/sampler.hpp"
#include "train/wiring.hpp"
#include "train/signals.hpp"
#include "tp/tp_model.hpp"

namespace zt::train {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string mib(std::size_t bytes) { return cat(static_cast<double>(bytes) / (1 << 20), " MiB"); }

// "parallel.pp 2 x parallel.tp 2 x 1 data-parallel" (the start-up line; the degrees above 1 only).
std::string describe_grid(const dist::Grid& g) {
  return cat(g.pp > 1 ? cat("parallel.pp ", g.pp, " x ") : "", g.tp > 1 ? cat("parallel.tp ", g.tp, " x ") : "", g.dp,
             " data-parallel");
}
}  // namespace

Trainer::Trainer(dist::World& world, const config::Config& config, const config::Derived& derived,
                 const dist::Placement& placement, const ResumePoint& resume)
    : world_(world), config_(config), derived_(derived), placement_(placement), table_(plan::model_shape(config.model)),
      started_(Clock::now()), scaler_(config.train) {
  install_stop_signal_handlers();
  backend_ = make_backend(config, placement);
  ring_ = std::make_unique<dist::CollectiveRing>();
  world_recording_.emplace(world, ring_.get());
  auto timed = std::make_unique<TimedCommunicator>(
      std::make_unique<RecordingCommunicator>(make_communicator(world, config, placement, *backend_), *ring_));
  timed_comm_ = timed.get(), comm_ = std::move(timed);
  comm_->set_timeout(dist::kStartUpFactor * config.dist.timeout_s);  // loose until step 1 completes
  const DType compute = plan::compute_dtype(config.train.precision);
  grid_ = dist::Grid::make(world.size(), static_cast<int>(config.parallel.tp), world.rank(),
                           static_cast<int>(config.parallel.pp));
  if (grid_.pp > 1) {
    make_pipeline_stage();
  } else if (grid_.tp > 1) {  // the TP model on its group's shard table; ZeRO over the DP group (shard_map.hpp)
    grid_comms_ = dist::split_grid(*comm_, grid_);
    local_table_.emplace(model::tp_local_table(table_, grid_.tp));
    shard_map_.emplace(ShardMap{table_, *local_table_, grid_});
    model_ = tp::make_tp_model(*backend_, *grid_comms_.tp, *local_table_, static_cast<int>(config.train.micro_batch),
                               config.parallel.sequence_parallel, plan::recompute_mode(config.train.recompute), compute);
  } else {
    model_ = model::make_model(*backend_, table_, static_cast<int>(config.train.micro_batch),
                               plan::recompute_mode(config.train.recompute), compute);
  }
  const int offload_threads = config.train.offload == config::Offload::kOptimizer ? placement.threads : 0;
  // LoRA: the adapters are what the engine optimises and the checkpoint holds; under parallel.tp > 1
  // this rank's TP shard of them, checkpointed in the global shape through their own ShardMap.
  if (config.lora.rank > 0) {
    lora_ = std::make_unique<LoraBase>(*backend_, dp_comm(), config, table_, shard_table(), grid_, compute);
    if (grid_.tp > 1) shard_map_.emplace(ShardMap{lora_->adapter_table(), lora_->adapter_shard_table(), grid_});
  }
  const model::ParamTable& trained = lora_ ? lora_->adapter_shard_table() : shard_table();
  engine_ = std::make_unique<optim::ZeroEngine>(*backend_, dp_comm(), units_of(trained), params_of(trained),
                                                static_cast<int>(config.train.zero_stage), config.zero.bucket_mb,
                                                offload_threads, compute);
  if (placement.device == config::Device::kCuda) gpu_monitor_.open(placement.device_index);
  hang_notes_ = std::make_unique<HangNotes>(world, std::filesystem::path(config.ckpt.dir) / "diag", *ring_);
  // NVML may open on some ranks only: log_step's reduction of its readings must be joined by every rank
  // or by none, so that is decided here, once (a rank without a monitor contributes 0 to the max).
  gpu_metrics_ = world.max_over_ranks(gpu_monitor_.available() ? 1 : 0, "start-up: which ranks read GPU power") != 0;
  predicted_peak_ = plan::plan_memory(config, world.size(), placement.threads, 0, placement.device).total_bytes;
  if (config.log.sample_every > 0) tokenizer_ = &load_tokenizer(config.data.vocab);
  if (lora_) {
    params_ = std::make_unique<ZeroParams>(lora_->base_engine());
    grads_ = std::make_unique<FrozenGrads>();
    lora_->attach(*model_, *engine_, static_cast<int>(config.train.micro_batch));
  } else {
    params_ = std::make_unique<ZeroParams>(*engine_);
    grads_ = std::make_unique<ZeroGrads>(*engine_);
  }
  checkpointer_ = std::make_unique<Checkpointer>(world, config, lora_ ? lora_->adapter_table() : table_, *engine_,
                                                 resume.run_id, shard_map_ ? &*shard_map_ : nullptr);
  // Before open_data: the loader starts at the restored step.
  hang_notes_->reporting([&] { resume.empty() ? init_parameters() : resume_from(resume); });
  open_data();
  if (world.is_root()) metrics_ = std::make_unique<MetricsLog>(config.log.metrics);
  stragglers_ = std::make_unique<StragglerWatch>(world, config.log);
  if (metrics_ && !resume.empty())
    metrics_->event(cat("{\"event\": \"resume\", \"step\": ", step_, ", \"from\": ", json_string(resume.dir.string()), "}"));
  const optim::MemoryBreakdown mem = engine_->memory();
  const char* family = config.model.arch == config::Arch::kLlama ? "Llama" : "GPT-2";
  log::info(cat("model: ", family, " L=", config.model.n_layer, " H=", config.model.n_head, " C=", config.model.n_embd,
                " V=", config.model.vocab_size, " T=", config.model.seq_len, ", ", table_.n_params_real(),
                " parameters; ", backend_->name(), ", ", config::to_string(config.train.precision), ", ", comm_->name(), "; ",
                world.size(), " rank(s)", grid_.pp > 1 || grid_.tp > 1 ? cat(" = ", describe_grid(grid_)) : "",
                ", ZeRO stage ", config.train.zero_stage, ", grad_accum ",
                derived.grad_accum, ", ", derived.tokens_per_step, " tokens/step"));
  log::info(cat("memory per rank: parameters ", mib(mem.params), lora_ ? cat(" (LoRA adapters; frozen base ", mib(lora_->base_bytes()), ")") : "",
                ", gradients ", mib(mem.grads), ", optimizer state ",
                mib(mem.optimizer), mem.host_optimizer ? cat(" (+ ", mib(mem.host_optimizer), " on the host: offload)") : "",
                ", activations ", mib(pipeline_ ? pipeline_->activation_bytes() : model_->activation_bytes()), " (recompute=",
                config::to_string(config.train.recompute), "); predicted peak ", mib(predicted_peak_)));
}

Trainer::~Trainer() = default;

// parallel.pp > 1: this rank's stage runs its blocks on its own table (the engine's, ZeRO over the DP
// group; under parallel.tp > 1 the TP shard of the stage's, run by the TP models over the TP group),
// checkpointed in the global shape (shard_map.hpp); the split is said once.
void Trainer::make_pipeline_stage() {
  check_pipeline_config(config_, placement_.comm == config::CommBackend::kNccl);
  grid_comms_ = dist::split_grid(*comm_, grid_);
  pipeline_ = std::make_unique<PipelineStage>(*backend_, table_, grid_, static_cast<int>(config_.parallel.vpp),
                                              static_cast<int>(config_.train.micro_batch),
                                              derived_.grad_accum, plan::recompute_mode(config_.train.recompute),
                                              plan::compute_dtype(config_.train.precision),
                                              config::pipeline_layers(config_), grid_comms_.tp.get(),
                                              config_.parallel.sequence_parallel);
  pipeline_->connect(*grid_comms_.pp, grid_comms_.embedding.get());
  local_table_.emplace(pipeline_->table());
  shard_map_.emplace(ShardMap{table_, *local_table_, grid_, pipeline_->cut()});
  log::info(cat("pipeline: parallel.pp=", grid_.pp,
                config_.parallel.vpp > 1 ? cat(" x parallel.vpp=", config_.parallel.vpp, " chunks, interleaved") : ", 1F1B",
                " over ", derived_.grad_accum, " micro-batches (bubble ", json_number(pipeline_->bubble_theory()),
                " in theory); ", pipeline_->split(), config_.parallel.pp_layers.empty() ? " (balanced by cost; " : " (parallel.pp_layers; ",
                pipeline_->cut().describe_costs(table_.shape()), ")"));
}

void Trainer::init_parameters() {
  if (lora_) return lora_->init(config_, *engine_, shard_map_ ? &*shard_map_ : nullptr);
  // The global model's initial values whatever the grid: a rank's part (TP shard, pipeline stage, or
  // both) reads its runs of them.
  if (config_.init.from.empty()) {
    const ReadGlobal init = [&](std::int64_t offset, std::int64_t count, float* out) {
      model::init_params_range(table_, config_.train.seed, offset, count, out);
    };
    engine_->load_params([&](std::int64_t offset, std::int64_t count, float* out) {
      if (shard_map_) return shard_map_->read_local(offset, count, out, init);
      init(offset, count, out);
    });
    return;
  }
  std::vector<float> flat(table_.numel());
  model::load_pretrained(config_.init.from, table_, flat.data());
  if (shard_map_) {  // this rank's part of the whole model's parameters
    std::vector<float> local(local_table_->numel());
    shard_map_->read_local(0, static_cast<std::int64_t>(local.size()), local.data(),
                           [&](std::int64_t o, std::int64_t n, float* into) { std::copy_n(flat.data() + o, n, into); });
    flat = std::move(local);
  }
  engine_->load_params(flat.data());
  log::info(cat("initialised from ", config_.init.from));
}

void Trainer::resume_from(const ResumePoint& resume) {
  const ckpt::TrainState s = checkpointer_->load(resume.dir);
  if (lora_) lora_->reload_base(config_, s.lora_base_sha256, resume.dir.string());  // the adapters came with s
  step_ = s.step;
  tokens_ = s.tokens;
  scaler_.restore(s.loss_scale);
  // The cursor counts global windows; the loader derives it from the step (same global_batch, checked
  // by pick_resume), so the next batch is the one the interrupted run would have taken.
  ZT_CHECK_EQ(s.windows_consumed, static_cast<std::uint64_t>(step_ * config_.train.global_batch), "data cursor of ",
              resume.dir.string());
  log::info(cat("resumed from ", resume.dir.string(), ": step ", step_, ", ", tokens_, " tokens, data cursor at window ",
                s.windows_consumed));
}

ckpt::TrainState Trainer::train_state() const {
  ckpt::TrainState s;
  s.step = step_;
  s.tokens = tokens_;
  s.global_batch = static_cast<std::uint64_t>(config_.train.global_batch);
  s.seq_len = static_cast<std::uint64_t>(config_.model.seq_len);
  s.windows_consumed = static_cast<std::uint64_t>(step_) * s.global_batch;
  s.windows_per_epoch = windows_per_epoch_;
  s.seed = config_.train.seed;
  s.loss_scale = scaler_.state();
  s.config_ini = config::to_ini(config_);
  s.git_revision = git_revision();
  if (lora_) s.lora_base_sha256 = lora_->base_sha256();
  return s;
}

void Trainer::open_data() {
  // Checked before (check_data, at start-up): here the trainer's own readers.
  const data::ShardExpectation expect = expected_shards(config_);
  train_tokens_ = data::open_shards(config_.data.train, "data.train", expect);
  if (!config_.data.valid.empty()) valid_tokens_ = data::open_shards(config_.data.valid, "data.valid", expect);
  data::WindowOrder order(train_tokens_->n_tokens(), config_.model.seq_len, config_.data.shuffle, config_.train.seed,
                          train_tokens_->packed_window() != 0);
  windows_per_epoch_ = order.windows_per_epoch();
  // Ranks of one TP group read the same slice: the grid's DP rank picks it.
  data::BatchSlice slice{config_.train.global_batch, config_.train.micro_batch, derived_.dp_size, grid_.dp_rank()};
  loader_ = std::make_unique<data::BatchLoader>(train_tokens_, order, slice, derived_.grad_accum, step_, 2,
                                                config_.data.document_mask);
  log::info(cat("data: ", train_tokens_->describe(), ", ", order.windows_per_epoch(), " windows per epoch"));
}

Trainer::StepResult Trainer::train_step(const data::StepBatch& batch) {
  // fp16: the loss gradient is scaled up (loss_scaler.hpp) and the scale divided out of the norm and
  // the update; 1 otherwise.
  const double loss_scale = scaler_.scale();
  StepResult r;
  r.trained_targets = global_trained_targets(batch.trained_targets(), *train_tokens_);
  const double denominator = std::max(1.0, r.trained_targets);  // a step with no trained target: loss 0
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
    hang_point(config_.debug, world_.rank(), config::HangPhase::kForward, step_ + 1);
    loss_sum = pipeline_->train(batch, *params_, *grads_, dloss, cat("step ", step_ + 1));
    lap(window_->phases.backward_ms);  // forward and backward interleave: timed as one phase
  }
  for (std::int64_t m = 0; !pipeline_ && m < batch.grad_accum; ++m) {
    batch.split(m, inputs, targets);
    set_comm_context(cat("step ", step_ + 1, " micro-batch ", m + 1, "/", batch.grad_accum));
    expect_access_order(true);
    t = Clock::now();
    hang_point(config_.debug, world_.rank(), config::HangPhase::kForward, step_ + 1);
    model_->set_segment_starts(batch.segments(m));  // data.document_mask, else null
    if (lora_) lora_->set_dropout(true, first_token(m));
    loss_sum += model_->forward(inputs.data(), targets.data(), *params_);
    slow_point(config_.debug, world_.rank(), ms_since(t));
    lap(window_->phases.forward_ms);
    engine_->begin_backward(m == batch.grad_accum - 1);
    hang_point(config_.debug, world_.rank(), config::HangPhase::kBackward, step_ + 1);
    model_->backward(*params_, *grads_, dloss);
    engine_->end_backward();
    lap(window_->phases.backward_ms);
  }
  set_comm_context(cat("step ", step_ + 1, " gradient reduction"));
  hang_point(config_.debug, world_.rank(), config::HangPhase::kReduce, step_ + 1);
  if (pipeline_) pipeline_->reduce_gradients(*engine_);
  r.grad_norm = engine_->finish_gradients();
  if (shard_map_)  // the whole model's norm from this rank's part (shard_map.hpp)
    r.grad_norm = grid_grad_norm(r.grad_norm, *engine_, grid_.tp > 1 ? grid_comms_.tp.get() : nullptr,
                                 shard_map_->replicated_ranges(), grid_.pp > 1 ? grid_comms_.pp.get() : nullptr,
                                 shard_map_->tied_copy_ranges());
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
  hang_point(config_.debug, world_.rank(), config::HangPhase::kOptimizer, step_ + 1);
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

// Each batch's read is agreed on (one all-reduce of a flag) before its forward pass, so a bad chunk in
// data.valid on one rank stops every rank at the step boundary (checkpointed), not between collectives.
std::optional<double> Trainer::evaluate() {
  const std::int64_t batches = config_.log.eval_batches;
  data::WindowOrder order(valid_tokens_->n_tokens(), config_.model.seq_len, /*shuffle=*/false, 0,
                          valid_tokens_->packed_window() != 0);
  data::BatchSlice slice{config_.train.global_batch, config_.train.micro_batch, derived_.dp_size, grid_.dp_rank()};
  data::BatchLoader loader(valid_tokens_, order, slice, derived_.grad_accum, 0, 1, config_.data.document_mask);
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
      loss_sum += model_->forward(inputs.data(), targets.data(), *params_);
    }
  }
  const double count = global_trained_targets(targets_here, *valid_tokens_);
  if (pipeline_) loss_sum = grid_comms_.pp->all_reduce_value(loss_sum, dist::ReduceOp::kSum);  // the last stage's
  return dp_comm().all_reduce_value(loss_sum, dist::ReduceOp::kSum) / std::max(1.0, count);
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
  const std::uint64_t peak = backend_->memory_stats().peak_bytes;
  m.mem_peak_bytes = static_cast<std::uint64_t>(comm_->all_reduce_value(static_cast<double>(peak), dist::ReduceOp::kMax));
  m.mem_predicted_bytes = predicted_peak_;
  if (scaler_.enabled()) m.loss_scale = r.loss_scale;
  if (pipeline_) {  // the window's share of waiting in transfers, averaged over the ranks (collective)
    const double run = pipeline_->run_ms() - pipeline_run_ms_, wait = pipeline_->wait_ms() - pipeline_wait_ms_;
    pipeline_run_ms_ = pipeline_->run_ms(), pipeline_wait_ms_ = pipeline_->wait_ms();
    m.pipeline_bubble = comm_->all_reduce_value(run > 0 ? wait / run : 0.0, dist::ReduceOp::kSum) / world_.size();
    m.pipeline_bubble_theory = pipeline_->bubble_theory();
  }
  if (placement_.device == config::Device::kCuda && config_.train.precision != config::Precision::kFp32)  // MFU: 16-bit GPU runs
    m.mfu = flops_per_token(config_.model.n_layer, config_.model.n_embd, config_.model.seq_len, table_.n_params_for_flops()) *
            m.tokens_per_s_per_rank / kPeakBf16Flops;
  // compute: the phases less the collectives' waits
  const double compute = m.forward_ms + m.backward_ms + m.comm_ms + m.optimizer_ms - w.blocked_ms_per_step;
  stragglers_->observe(step_ - w.steps + 1, step_, compute, w.blocked_ms_per_step + m.data_wait_ms, m);
  if (gpu_metrics_) {  // max over ranks: the hottest, hungriest device of the job
    const GpuReading g = gpu_monitor_.available() ? gpu_monitor_.read() : GpuReading{};
    m.gpu_power_w = comm_->all_reduce_value(g.power_w, dist::ReduceOp::kMax);
    m.gpu_temp_c = comm_->all_reduce_value(g.temp_c, dist::ReduceOp::kMax);
  }
  if (metrics_) metrics_->step(m);
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
  if (!skip_collective(config_.debug, world_.rank(), step_))  // TEST ONLY: a skipped collective
    agree_max(flags, 3);
  if (flags[1] == 0) checkpointer_->finish();  // commits a finished background write, if any
  data_failed_ = flags[2] != 0;
  const bool stop = (flags[0] != 0 || data_failed_) && step_ < last;
  const std::int64_t every = config_.ckpt.every;
  if (step_ == last || stop || (every > 0 && step_ % every == 0)) checkpointer_->save(train_state());
  return stop;
}

// The world's traffic and waits, and under parallel.tp those of the TP and DP groups (split from comm_:
// timed children that count their own).
std::vector<dist::Communicator*> Trainer::groups() const {
  std::vector<dist::Communicator*> out;
  for (auto* group : {grid_comms_.tp.get(), grid_comms_.dp.get(), grid_comms_.pp.get(), grid_comms_.embedding.get()})
    if (group) out.push_back(group);
  return out;
}

std::uint64_t Trainer::comm_bytes() const {
  std::uint64_t bytes = comm_->stats().total_bytes();
  for (const auto* group : groups()) bytes += group->stats().total_bytes();
  return bytes;
}

// The TP and DP groups took comm_'s context and deadline when split; they follow its changes.
void Trainer::set_comm_context(const std::string& context) {
  comm_->set_context(context);
  for (auto* group : groups()) group->set_context(context);
}

void Trainer::set_comm_timeout(double seconds) {
  comm_->set_timeout(seconds);
  for (auto* group : groups()) group->set_timeout(seconds);
}

double Trainer::blocked_ms() const {
  double ms = timed_comm_->blocked_ms();
  for (const auto* group : groups())
    if (const auto* timed = dynamic_cast<const TimedCommunicator*>(group)) ms += timed->blocked_ms();
  return ms;
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
  engine_->expect_access_order(backward ? forward_backward_order(n_layer, tied) : forward_order(n_layer, tied));
}

// A deadline or communication error: the ranks compare their last collectives (hang_notes.hpp)
// before the boundary ends the job.
int Trainer::run() { return hang_notes_->reporting([this] { return train_loop(); }); }

int Trainer::train_loop() {
  const std::int64_t last = config_.train.stop_at_step > 0 ? config_.train.stop_at_step : config_.train.max_steps;
  if (step_ >= last) {
    log::info(cat("nothing to train: the run is at step ", step_, " and stops at step ", last,
                  " (train.max_steps / train.stop_at_step)"));
    return kExitOk;
  }
  const std::int64_t first = step_ + 1;  // this invocation's first step (after a resume: not step 1)
  window_.emplace(loader_->wait_ms_total(), comm_bytes());
  std::optional<data::StepBatch> batch = read_next_batch();
  if (data_error_anywhere()) return stop_on_data_error();  // before this invocation's first step
  while (step_ < last) {
    const double blocked_before = blocked_ms();
    const StepResult r = train_step(*batch);
    window_->phases.blocked_ms += blocked_ms() - blocked_before;
    ++step_;
    window_->add_step(r.trained_targets);
    tokens_ += static_cast<std::uint64_t>(derived_.tokens_per_step);
    last_loss_ = r.loss;
    if (!std::isfinite(r.loss) && !r.skipped)  // fp16: an overflowing step is the scaler's business
      throw Error(cat("the loss became ", r.loss, " at step ", step_, ": lower optim.lr or raise optim.warmup_steps"));
    if (step_ == first) {  // start-up is over: the tight deadline from now on (dist/deadline.hpp)
      set_comm_timeout(config_.dist.timeout_s);
      world_.set_timeout(config_.dist.timeout_s);
    }
    if (r.skipped)
      log::warn(cat("step ", step_, ": fp16 gradients overflowed at loss scale ", json_number(r.loss_scale),
                    "; the update is skipped (the batch still counts), scale now ", json_number(scaler_.scale())));
    if (step_ % config_.log.every == 0 || step_ == last || r.skipped) log_step(r);
    if (valid_tokens_ && config_.log.eval_every > 0 && step_ % config_.log.eval_every == 0) {
      const std::optional<double> val = evaluate();
      if (metrics_ && val) metrics_->eval(step_, *val);
    }
    if (config_.log.sample_every > 0 && (step_ % config_.log.sample_every == 0 || step_ == last)) sample();
    inject_faults(config_.debug, world_.rank(), step_);
    if (step_ < last) batch = read_next_batch();  // before the boundary, which agrees on a data error
    if (at_step_boundary(last)) {
      checkpointer_->finish();
      if (data_failed_) return stop_on_data_error();
      log::info(cat("stopped after step ", step_, " on ", stop_reason(), ", checkpointed: exit ", kExitRequeue,
                    " (requeue; ckpt.resume=auto continues from here)"));
      return record_exit(kExitRequeue, stop_reason());
    }
  }
  checkpointer_->finish();
  if (data_failed_) return stop_on_data_error();  // the last step's evaluation: trained, but not done
  log::info(cat("done: ", step_, " steps, final loss ", json_number(last_loss_)));
  return record_exit(kExitOk, "done");
}

// The job scripts read the exit code here: mpirun reports 1 after a SIGTERM whatever the ranks return.
int Trainer::record_exit(int code, const std::string& reason) {
  if (metrics_)
    metrics_->event(cat("{\"event\": \"exit\", \"step\": ", step_, ", \"code\": ", code, ", \"reason\": ",
                        json_string(reason), "}"));
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
  log::error(cat("stopped after step ", step_, " on unreadable data (above); ", kept,
                 ": replace the shard, then rerun; exit ", kExitRuntime));
  return kExitRuntime;
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
  if (metrics_) metrics_->event(cat("{\"step\": ", step_, ", \"sample\": ", json_string(text), "}"));
}

}  // namespace zt::train
