// One rank's trainer, set up: the backend, communicators and grid, the model (or pipeline stage or TP
// model), the ZeRO engine, LoRA, the checkpointer, the parameters (initialised or resumed) and the data
// loader. The step is in trainer_step.cpp, the loop in trainer_loop.cpp, what it reports in trainer_report.cpp.
#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "ckpt/layout.hpp"
#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/version.hpp"
#include "core/log.hpp"
#include "io/json_text.hpp"
#include "data/shard_set.hpp"
#include "dist/deadline.hpp"
#include "model/export_base.hpp"
#include "model/family.hpp"
#include "model/init.hpp"
#include "model/initial_weights.hpp"
#include "optim/zero/transients.hpp"
#include "plan/memory_plan.hpp"
#include "train/attention_check.hpp"
#include "train/critic.hpp"
#include "train/data_check.hpp"
#include "train/prompt_check.hpp"
#include "dist/recording_communicator.hpp"
#include "train/shared_input.hpp"
#include "train/wiring.hpp"
#include "train/signals.hpp"
#include "train/trainer_rl.hpp"

namespace zt::train {
namespace {
using Clock = std::chrono::steady_clock;
std::string mib(std::size_t bytes) { return cat(static_cast<double>(bytes) / (1 << 20), " MiB"); }

// "parallel.pp 2 x parallel.tp 2 x 1 data-parallel" (the start-up line; the degrees above 1 only).
std::string describe_grid(const dist::Grid& g) {
  return cat(g.pp > 1 ? cat("parallel.pp ", g.pp, " x ") : "", g.tp > 1 ? cat("parallel.tp ", g.tp, " x ") : "", g.dp,
             " data-parallel");
}
}  // namespace

Trainer::Trainer(dist::World& world, const config::Config& config, const config::Derived& derived,
                 const dist::Placement& placement, const ResumePoint& resume)
    : world_(world), config_(config), derived_(derived), placement_(placement), table_(model::model_shape(config.model)),
      started_(process_started()), scaler_(config.train) {
  install_stop_signal_handlers();
  backend_ = make_backend(config, placement);
  ring_ = std::make_unique<dist::CollectiveRing>();
  world_recording_.emplace(world, ring_.get());
  auto timed = std::make_unique<dist::TimedCommunicator>(
      std::make_unique<dist::RecordingCommunicator>(make_communicator(world, config, placement, *backend_), *ring_));
  timed_comm_ = timed.get(), comm_ = std::move(timed);
  comm_->set_timeout(dist::kStartUpFactor * config.dist.timeout_s,  // loose until step 1 completes
                     dist::start_up_limit_words(config.dist.timeout_s));
  const DType compute = model::compute_dtype(config.train.precision);
  model::ModelOptions model_options{.micro_batch = static_cast<int>(config.train.micro_batch),
                                    .recompute = config.train.recompute, .compute = compute,
                                    .loss_chunk = config.train.loss_chunk};
  grid_ = dist::Grid::make(world.size(), static_cast<int>(config.parallel.tp), world.rank(),
                           static_cast<int>(config.parallel.pp));
  if (grid_.pp > 1) {
    make_pipeline_stage();
  } else if (grid_.tp > 1) {  // the TP model on its group's shard table; ZeRO over the DP group (shard_map.hpp)
    grid_comms_ = dist::split_grid(*comm_, grid_);
    local_table_.emplace(model::tp_local_table(table_, grid_.tp));
    shard_map_.emplace(ShardMap{table_, *local_table_, grid_});
    model_options.tp_group = grid_comms_.tp.get();
    model_options.sequence_parallel = config.parallel.sequence_parallel;
    model_ = model::make_model(*backend_, *local_table_, model_options);
  } else {
    model_ = model::make_model(*backend_, table_, model_options);
  }
  // LoRA: the adapters are what the engine optimises and the checkpoint holds; under a pipeline those of
  // this rank's blocks, under parallel.tp > 1 their TP shard (LoraBase's adapter ShardMap).
  if (config.lora.rank > 0)
    lora_ = std::make_unique<LoraBase>(*backend_, dp_comm(), config, table_, compute, shard_map_ ? &*shard_map_ : nullptr,
                                       optim::offload_options(config, 0, world.rank(), "base"));
  const model::ParamTable& trained = lora_ ? lora_->adapter_part() : shard_table();
  const int stage = static_cast<int>(config.train.zero_stage);
  engine_units_ = lora_ ? optim::engine_units(trained) : optim::decoder_engine_units(config, trained, grid_.tp_rank());
  if (shard_map_ && !lora_) shard_map_->engine_units = engine_units_.ranges;
  const optim::ZeroOptions zero =
      lora_ ? optim::ZeroOptions::from(config.zero)
            : optim::decoder_zero_options(config.zero, optim::Partition(engine_units_.ranges, optim::params_of(trained),
                                                                        dp_comm().size(), dp_comm().rank()),
                                          stage, compute, trained.shape().n_layer, trained.shape().tie_embeddings);
  engine_ = std::make_unique<optim::ZeroEngine>(*backend_, dp_comm(), engine_units_.ranges, optim::params_of(trained),
                                                stage, zero,
                                                optim::offload_options(config, offload_threads(), world.rank(), "model"), compute);
  if (placement.device == config::Device::kCuda) gpu_monitor_.open(placement.device_index);
  hang_notes_ = std::make_unique<health::HangNotes>(world, std::filesystem::path(config.ckpt.dir) / "diag", *ring_);
  // NVML may open on some ranks only: log_step's reduction of its readings must be joined by every rank
  // or by none, so that is decided here, once (a rank without a monitor contributes 0 to the max).
  gpu_metrics_ = world.max_over_ranks(gpu_monitor_.available() ? 1 : 0, "start-up: which ranks read GPU power") != 0;
  // data.vocab (validated) with the special ids the shards record: samples of fine-tuning data hold them.
  if (config.log.sample_every > 0) tokenizer_ = &text_tokenizer(config, "log.sample_every");
  if (lora_) {
    params_ = lora_->base_source();
    grads_ = std::make_unique<FrozenGrads>();
    model::Lora& adapters = lora_->attach(*engine_, static_cast<int>(config.train.micro_batch));
    if (pipeline_) pipeline_->set_lora(adapters, lora_->adapter_part(), [this](int m) { return first_token(m); });
    else model_->set_lora(&adapters);
  } else {
    params_ = std::make_unique<optim::ZeroParams>(*engine_, &engine_units_);
    grads_ = std::make_unique<optim::ZeroGrads>(*engine_, &engine_units_);
  }
  checkpointer_ = std::make_unique<Checkpointer>(world, config, lora_ ? lora_->adapter_table() : table_, *engine_,
                                                 resume.run_id, trained_map());
  // Before open_data: the loader starts at the restored step. The corpora first: a resume compares
  // their shards with the checkpoint's, and may start the blend's order at its cursor.
  if (!config.rl.enabled()) blend_ = open_train_blend(config, 0);
  hang_notes_->reporting([&] { resume.empty() ? init_parameters() : resume_from(resume); });
  if (config.rl.enabled()) open_rl(resume);
  else open_data();
  if (!config.log.eval_prompts.empty()) answer_eval_ = std::make_unique<AnswerEvaluation>(config);
  // The plan with the evaluation's sequences at their known length (open_rl plans an RL run's rollouts).
  if (!config.rl.enabled())
    predicted_peak_ = plan::plan_memory(config, world.size(), placement.threads, 0, placement.device,
                                        {.evaluation = answer_eval_ ? answer_eval_->max_len() : 0,
                                         .evaluation_prompts = answer_eval_ ? answer_eval_->prompt_count() : 0,
                                         .evaluation_prompt = answer_eval_ ? answer_eval_->longest_prompt() : 0})
                          .total_bytes;
  if (world.is_root()) metrics_ = std::make_unique<MetricsLog>(config.log.metrics);
  stragglers_ = std::make_unique<health::StragglerWatch>(world, config.log, static_cast<int>(config.parallel.pp), ring_.get());
  if (metrics_ && !resume.empty())
    metrics_->event(cat("{\"event\": \"resume\", \"step\": ", step_, ", \"from\": ", io::json_string(resume.dir.string()), "}"));
  const optim::MemoryBreakdown mem = engine_->memory();
  const std::string attention = backend_->attention_summary(attention_query(config));
  log::info(cat("model: ", model::family_of(table_.shape().arch).describe(table_.shape()), " L=", config.model.n_layer, " H=", config.model.n_head, " C=", config.model.n_embd,
                " V=", config.model.vocab_size, " T=", config.model.seq_len, ", ", table_.n_params_real(),
                " parameters; ", backend_->name(), attention.empty() ? "" : cat(", attention: ", attention), ", ",
                config::to_string(config.train.precision), ", ", comm_->name(), "; ",
                world.size(), " rank(s)", grid_.pp > 1 || grid_.tp > 1 ? cat(" = ", describe_grid(grid_)) : "",
                ", ZeRO stage ", config.train.zero_stage, ", grad_accum ",
                derived.grad_accum, ", ", derived.tokens_per_step, " tokens/step"));
  if (config.model.qk_norm && config.model.qkv_bias)  // said now, not at the export after the run
    log::warn("model.qk_norm with model.qkv_bias: no Hugging Face architecture has both (Qwen2 has the q, k, v biases, "
              "Qwen3 the head norms), so this model trains, resumes and generates with zgen, but zckpt export cannot "
              "write it as a Hugging Face directory");
  if (const optim::EngineUnits& split = lora_ ? lora_->base_units() : engine_units_; split.pieced())
    log::info(cat("zero.split_vocab: the ", lora_ ? "frozen base's " : "", "token embedding in ", split.pieces(0),
                  " units and the LM head in ", split.pieces(config.model.n_layer + 1) - 1,
                  " (the loss's vocabulary chunks", grid_.tp > 1 ? cat("; TP rank ", grid_.tp_rank()) : "", "), gathered",
                  lora_ ? "" : " and reduced", " one at a time"));
  const std::string params_off = mem.host_params ? cat(" (+ ", mib(mem.host_params), " on the host",
                                                       mem.nvme_params ? cat(" and ", mib(mem.nvme_params), " on NVMe") : "",
                                                       ": offload)") : "";
  log::info(cat("memory per rank: parameters ", mib(mem.params), params_off, lora_ ? cat(" (LoRA adapters; frozen base ", mib(lora_->base_bytes()), ")") : "",
                ", gradients ", mib(mem.grads), ", optimizer state ",
                mib(mem.optimizer), mem.host_optimizer ? cat(" (+ ", mib(mem.host_optimizer), " on the host",
                                                                   mem.nvme_optimizer ? cat(" and ", mib(mem.nvme_optimizer), " on NVMe") : "",
                                                                   ": offload)") : "",
                ", activations ", mib(pipeline_ ? pipeline_->activation_bytes() : model_->activation_bytes()), " (recompute=",
                config::to_string(config.train.recompute), "); predicted peak ", mib(predicted_peak_)));
}

Trainer::~Trainer() = default;

// parallel.pp > 1: this rank's stage runs its blocks on its own table (the engine's, ZeRO over the DP
// group; under parallel.tp > 1 the TP shard of the stage's, run by the TP models over the TP group),
// checkpointed in the global shape (shard_map.hpp); the split is said once.
void Trainer::make_pipeline_stage() {
  config::check_pipeline_runs(config_, placement_.comm == config::CommBackend::kNccl);
  grid_comms_ = dist::split_grid(*comm_, grid_);
  const model::ModelOptions models{.micro_batch = static_cast<int>(config_.train.micro_batch),
                                   .recompute = config_.train.recompute,
                                   .compute = model::compute_dtype(config_.train.precision),
                                   .tp_group = grid_comms_.tp.get(),
                                   .sequence_parallel = config_.parallel.sequence_parallel,
                                   .loss_chunk = config_.train.loss_chunk};
  pipeline_ = std::make_unique<PipelineStage>(*backend_, table_, grid_, static_cast<int>(config_.parallel.vpp),
                                              derived_.grad_accum, models, config::pipeline_layers(config_));
  pipeline_->connect(*grid_comms_.pp, grid_comms_.embedding.get());
  local_table_.emplace(pipeline_->table());
  shard_map_.emplace(ShardMap{table_, *local_table_, grid_, pipeline_->cut()});
  log::info(cat("pipeline: parallel.pp=", grid_.pp,
                config_.parallel.vpp > 1 ? cat(" x parallel.vpp=", config_.parallel.vpp, " chunks, interleaved") : ", 1F1B",
                " over ", derived_.grad_accum, " micro-batches (bubble ", io::json_number(pipeline_->bubble_theory()),
                " in theory); ", pipeline_->split(), config_.parallel.pp_layers.empty() ? " (balanced by cost; " : " (parallel.pp_layers; ",
                pipeline_->cut().describe_costs(table_.shape()), ")"));
}

void Trainer::init_parameters() {
  if (lora_) return lora_->init(world_, config_, *engine_);
  // The global model's initial values whatever the grid: a rank's part (TP shard, pipeline stage, or
  // both) reads its runs of them (model::InitialWeights), a unit at a time (no whole-model copy on the
  // host); every rank's problem with init.from (a damaged tensor in its part) is agreed on, as the
  // headers' are.
  const ShardMap* map = shard_map_ ? &*shard_map_ : nullptr;
  const auto load = [&] {
    const model::InitialWeights weights(config_.init.from, table_, config_.train.seed);
    engine_->load_params(local_reader(map, [&](std::int64_t offset, std::int64_t count, float* out) {
      weights.read(offset, count, out);
    }));
  };
  if (config_.init.from.empty()) return load();
  read_shared_input(world_, [&] {
    load();
    base_fingerprint_ = model::base_fingerprint(config_.init.from, table_.shape());  // what an export reads of it
  }, cat("init.from=", config_.init.from));
  log::info(cat("initialised from ", config_.init.from));
}

void Trainer::resume_from(const ResumePoint& resume) {
  const ckpt::TrainState s = checkpointer_->load(resume.dir);
  if (lora_) lora_->reload_base(world_, config_, s.lora_base_sha256, resume.dir.string());  // the adapters came with s
  // The run's start's, carried on; a checkpoint from before fingerprints gets this start's (sweep 33 N2),
  // so at least a change from now on is caught at export.
  base_fingerprint_ = s.init_from_sha256;
  if (base_fingerprint_.empty() && !lora_ && !config_.init.from.empty()) {
    base_fingerprint_ = model::base_fingerprint(config_.init.from, table_.shape());
    if (!base_fingerprint_.empty())
      log::info(cat(resume.dir.string(), " records no fingerprint of its base (written before they were): init.from=",
                    config_.init.from, " is recorded as it is now, so an export refuses it if it changes from here on"));
  }
  step_ = s.step;
  tokens_ = s.tokens;
  scaler_.restore(s.loss_scale);
  // The cursor counts global windows; the loader derives it from the step (same global_batch, checked
  // by pick_resume), so the next batch is the one the interrupted run would have taken.
  if (s.windows_consumed != static_cast<std::uint64_t>(step_ * config_.train.global_batch))
    throw InputError(cat(resume.dir.string(), "/", ckpt::kStateFile, ": its data cursor (windows_consumed ",
                         s.windows_consumed, ") is not its step x train.global_batch (", step_, " x ",
                         config_.train.global_batch, "): the file was edited or written by another tool; resume an "
                         "earlier checkpoint (ckpt.resume=PATH)"));
  log::info(cat("resumed from ", resume.dir.string(), ": step ", step_, ", ", tokens_, " tokens, data cursor at window ",
                s.windows_consumed));
  if (config_.rl.enabled()) return;  // RL's prompt cursor is the iteration (step_): no data blend
  blend_start_ = blend_start_on_resume(s, config_, resume.dir, blend_.cursor(0));
  if (blend_start_ != 0) blend_.begin_order_at(config_, blend_start_);
  if (blend_start_ != s.blend_start)
    log::info(cat("data.reset_order=true: data.train's new blend starts its order at window ", blend_start_));
}

ckpt::TrainState Trainer::train_state() const {
  ckpt::TrainState s;
  s.step = step_;
  s.tokens = tokens_;
  s.global_batch = static_cast<std::uint64_t>(config_.train.global_batch);
  s.seq_len = static_cast<std::uint64_t>(config_.model.seq_len);
  s.windows_consumed = static_cast<std::uint64_t>(step_) * s.global_batch;
  s.windows_per_epoch = windows_per_epoch_;
  if (!config_.rl.enabled()) s.blend = blend_.cursor(s.windows_consumed);  // RL: the iteration is the cursor
  s.blend_start = blend_start_;
  s.seed = config_.train.seed;
  s.loss_scale = scaler_.state();
  s.config_ini = config::to_ini(config_);
  s.git_revision = git_revision();
  if (lora_) s.lora_base_sha256 = lora_->base_sha256();
  s.rl_reference_sha256 = reference_sha256_;
  s.init_from_sha256 = base_fingerprint_;
  return s;
}

void Trainer::open_data() {
  // Checked before (check_data, at start-up): here the trainer's own readers.
  const data::ShardExpectation expect = expected_shards(config_);
  train_tokens_ = blend_.sources.front();  // blend_: opened before the parameters (a resume checks its shards)  // the corpora are of one kind (loss mask, packing)
  if (!config_.data.valid.empty()) valid_tokens_ = data::open_shards(config_.data.valid, "data.valid", expect);
  windows_per_epoch_ = blend_.windows_per_epoch();
  // Ranks of one TP group read the same slice: the grid's DP rank picks it.
  data::BatchSlice slice{config_.train.global_batch, config_.train.micro_batch, derived_.dp_size, grid_.dp_rank()};
  loader_ = std::make_unique<data::BatchLoader>(blend_.sources, *blend_.order, slice, derived_.grad_accum, step_, 2,
                                                data::DocumentViews{config_.data.document_mask, config_.data.reset_positions});
  log::info(cat("data: ", blend_.describe()));
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

void Trainer::set_comm_timeout(double seconds, const std::string& words) {
  comm_->set_timeout(seconds, words);
  for (auto* group : groups()) group->set_timeout(seconds, words);
}

double Trainer::blocked_ms() const {
  double ms = timed_comm_->blocked_ms();
  for (const auto* group : groups())
    if (const auto* timed = dynamic_cast<const dist::TimedCommunicator*>(group)) ms += timed->blocked_ms();
  return ms;
}

}  // namespace zt::train

