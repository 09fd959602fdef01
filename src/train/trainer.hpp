// The training loop: data -> forward/backward per micro-batch -> gradient reduction -> clip -> AdamW
// -> metrics, for one rank of the job. Built once per invocation by train::run.
// Defined along the data path: trainer.cpp (set-up), trainer_step.cpp (one step), trainer_loop.cpp
// (the loop, its step boundary and how it ends), trainer_report.cpp (metrics lines, evaluation, samples),
// trainer_rl.cpp (rl.prompts set: RL iterations as the steps).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/derived.hpp"
#include "data/batch_loader.hpp"
#include "dist/collective_ring.hpp"
#include "dist/communicator.hpp"
#include "dist/grid.hpp"
#include "dist/placement.hpp"
#include "dist/timed_communicator.hpp"
#include "health/gpu_monitor.hpp"
#include "health/hang_notes.hpp"
#include "health/stragglers.hpp"
#include "model/device_weights.hpp"
#include "model/model.hpp"
#include "optim/zero/engine.hpp"
#include "optim/zero/model_adapters.hpp"
#include "rl/rollouts.hpp"
#include "tok/tokenizer.hpp"
#include "train/answer_eval.hpp"
#include "train/checkpointer.hpp"
#include "train/lora_base.hpp"
#include "train/loss_scaler.hpp"
#include "train/metrics.hpp"
#include "train/metrics_window.hpp"
#include "train/pipeline_stage.hpp"
#include "train/resume.hpp"
#include "train/shard_map.hpp"
#include "train/train_blend.hpp"

namespace zt::train {

class Critic;
class ReferencePolicy;

class Trainer {
 public:
  Trainer(dist::World& world, const config::Config& config, const config::Derived& derived,
          const dist::Placement& placement, const ResumePoint& resume = {});
  ~Trainer();
  int run();  // exit code: 0 done, 75 checkpointed and stopped on a signal or the time limit

  // The mean loss of the last completed step (tests).
  double last_loss() const { return last_loss_; }

 private:
  struct StepResult {
    double loss = 0, grad_norm = 0, lr = 0, loss_scale = 1;
    double trained_targets = 0;  // over all ranks: the loss's denominator
    bool skipped = false;  // fp16 overflow: no update
    bool abandoned = false;  // RL: the iteration was given up on a stop signal (rl_score_or_stop), nothing applied
  };
  int train_loop();  // run() without the hang report
  // train_step, then the counters: step_, tokens_, last_loss_ and the window's steps and blocked time.
  StepResult take_step(const data::StepBatch& batch);
  StepResult train_step(const data::StepBatch& batch);
  // Collective when `source` has a loss mask: the global count of targets entering the loss, given
  // this rank's (`here`); without a mask every rank has the same count, so no communication.
  double global_trained_targets(std::uint64_t here, const data::TokenSource& source);
  std::optional<double> evaluate();  // collective; nullopt: a rank could not read its data (data_error_)
  void evaluate_answers();           // collective: log.eval_prompts generated and scored, a metrics line
  void log_step(const StepResult& r);  // closes window_ into one metrics line (collective)
  // Whether the step just taken (step_) gets a metrics line, an evaluation, a text sample; `last` is
  // this run's last step.
  bool log_due(const StepResult& r, std::int64_t last) const;
  bool eval_due() const;
  bool sample_due(std::int64_t last) const;
  void init_parameters();
  void expect_access_order(bool backward);  // the next pass's unit order, for the engine(s)
  std::uint64_t first_token(std::int64_t micro) const;  // LoRA dropout: micro-batch's first global token
  void resume_from(const ResumePoint& resume);
  void open_data();
  bool at_step_boundary(std::int64_t last);  // collective; true: stop now (checkpointed)
  std::string stopped_line(const char* unit) const;  // "stopped after step N on SIGTERM, checkpointed: exit 75 ..."
  // The next step's batch, read before the step boundary; nullopt: a DataError here (data_error_).
  std::optional<data::StepBatch> read_next_batch();
  void agree_max(std::int32_t* flags, std::size_t n);  // collective: each flag's maximum over ranks
  bool data_error_anywhere();        // collective: the first batch of this invocation is unreadable somewhere
  bool stopped_before_first_step();  // collective: a stop requested during start-up on any rank
  int stop_on_data_error();    // collective: rank 0 names each failing rank's shard and range; exit 1
  bool stop_requested_here() const;          // a signal or the time limit, on this rank
  bool time_is_up() const;                   // train.time_limit_min has passed
  std::string stop_reason() const;
  int record_exit(int code, const std::string& reason);  // the metrics exit event; returns code
  void sample();
  ckpt::TrainState train_state() const;
  // RL (trainer_rl.cpp): the run's prompts, reward and generation engine, opened instead of the data;
  // the loop of iterations; an iteration's rollouts, rewards, log-probabilities, updates and metrics line.
  struct RlRun;
  struct RlSums;
  void open_rl(const ResumePoint& resume);  // a resumed PPO run's critic from resume.dir
  std::unique_ptr<ReferencePolicy> reference_policy(const ResumePoint& resume);
  std::unique_ptr<GenerationWeights> generation_weights();  // lora_base.hpp's (collective at ZeRO-3)
  int rl_loop();
  StepResult rl_iteration();
  std::vector<rl::Rollout> rl_generate(RlSums& sums);
  void rl_score(std::vector<rl::Rollout>& rollouts, RlSums& sums);
  // rl_score; false, on every rank, when a stop signal ended the reward program on some rank (a
  // whole-job SIGTERM reaches it too: scancel, a time limit): the iteration is then given up.
  bool rl_score_or_stop(std::vector<rl::Rollout>& rollouts, RlSums& sums);
  int rl_stop_after_abandoned_iteration();  // the stop that follows: the last whole iteration's checkpoint, 75
  void rl_write_rollouts(const std::vector<rl::Rollout>& rollouts);  // rl.rollout_dir (collective)
  // The iteration's forward passes (rl::UpdatePlan, equal counts over the data-parallel group: collective),
  // and pass m of optimizer step `step` as a micro-batch; the model told its layout.
  void rl_balance(std::vector<rl::Rollout>& rollouts);
  void rl_plan(const std::vector<rl::Rollout>& rollouts);
  rl::MicroBatch rl_micro_batch(const std::vector<rl::Rollout>& rollouts, std::int64_t step, std::int64_t m) const;
  // The rollouts' response log-probabilities under the current policy, the KL reference or a LoRA base.
  enum class LogprobsOf { kPolicy, kReference, kBase };
  std::vector<std::vector<float>> rl_logprobs(const std::vector<rl::Rollout>& rollouts, LogprobsOf of);
  StepResult rl_update(const std::vector<rl::Rollout>& rollouts, std::int64_t step, std::int64_t total_tokens,
                       const std::vector<std::vector<float>>& old_logp, const std::vector<std::vector<float>>& ref_logp,
                       std::int64_t adam_step, double lr, RlSums& sums);
  void rl_log(const StepResult& r, const RlSums& sums);
  // PPO (critic.hpp): the critic's values of every response token at the rollout, GAE's advantages and
  // returns (whitened over the data-parallel ranks: collective), and one critic step over a mini-batch.
  void rl_values(std::vector<rl::Rollout>& rollouts);
  void rl_gae(std::vector<rl::Rollout>& rollouts, const std::vector<std::vector<float>>& old_logp,
              const std::vector<std::vector<float>>& ref_logp, RlSums& sums);
  double rl_critic_update(const std::vector<rl::Rollout>& rollouts, std::int64_t step, std::int64_t total_tokens,
                          std::int64_t adam_step, RlSums& sums);
  // parallel.tp > 1: the engine and the loss reductions run over the DP group, the model on the TP
  // group's shard table (shard_map.hpp); tp = 1: the world and the whole table.
  dist::Communicator& dp_comm() { return grid_comms_.dp ? *grid_comms_.dp : *comm_; }
  const model::ParamTable& shard_table() const { return local_table_ ? *local_table_ : table_; }
  // How the engine's table (the model's part, or a LoRA run's adapters) maps to the whole; null: it is the whole.
  const ShardMap* trained_map() const { return lora_ ? lora_->adapter_map() : shard_map_ ? &*shard_map_ : nullptr; }
  std::uint64_t comm_bytes() const;  // payload bytes over every group this rank communicates in
  // The host threads of an engine's optimizer offload (train.offload=optimizer or params; 0: none): the actor's and the critic's.
  int offload_threads() const { return config_.train.offload != config::Offload::kNone ? placement_.threads : 0; }
  double blocked_ms() const;         // time blocked in their collectives
  void make_pipeline_stage();                         // parallel.pp > 1: the stage, its table and groups
  std::vector<dist::Communicator*> groups() const;    // the groups split from comm_ (the grid's)
  void set_comm_context(const std::string& context);  // on every group (watchdog messages)
  void set_comm_timeout(double seconds, const std::string& words = {});  // words: Communicator::set_timeout's

  dist::World& world_;  // non-const: the trainer tightens its deadline after step 1
  const config::Config& config_;
  config::Derived derived_;
  dist::Placement placement_;
  std::unique_ptr<dist::CollectiveRing> ring_;  // this rank's last collectives, for hang reports (before comm_)
  std::optional<dist::WorldRecording> world_recording_;  // the world's agreements into ring_ while this lives
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<dist::Communicator> comm_;
  model::ParamTable table_;
  dist::Grid grid_;                               // world = parallel.pp x data-parallel x parallel.tp ranks
  dist::GridComms grid_comms_;                    // tp > 1 or pp > 1: this rank's groups (split from comm_)
  std::optional<model::ParamTable> local_table_;  // this rank's part of table_: its TP shard, its stage's, or both
  std::optional<ShardMap> shard_map_;             // tp > 1 or pp > 1: local_table_ in the global model
  std::unique_ptr<PipelineStage> pipeline_;     // parallel.pp > 1: this rank's stage (its table is local_table_)
  double pipeline_run_ms_ = 0, pipeline_wait_ms_ = 0;  // the pipeline's times at the last metrics line
  std::unique_ptr<model::Model> model_;
  optim::EngineUnits engine_units_;  // engine_'s units: the trained table's, split vocabulary units in pieces (zero.split_vocab)
  std::unique_ptr<optim::ZeroEngine> engine_;
  std::unique_ptr<LoraBase> lora_;             // lora.rank > 0: the frozen base and the adapters engine_ trains
  std::unique_ptr<model::ParamSource> params_;  // the model's parameters (LoRA: the frozen base)
  std::unique_ptr<model::GradSink> grads_;
  std::shared_ptr<const data::TokenSource> train_tokens_, valid_tokens_;
  std::unique_ptr<data::BatchLoader> loader_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::chrono::steady_clock::time_point started_;  // for train.time_limit_min
  LossScaler scaler_;
  std::int64_t step_ = 0;        // completed optimizer steps
  std::int64_t background_save_ = -1;  // the step whose checkpoint ckpt.async last wrote in the background
  bool kept_background_save_ = false;  // a stop kept that checkpoint instead of writing its step's
  std::uint64_t tokens_ = 0;     // tokens trained on, cumulative
  std::uint64_t windows_per_epoch_ = 0;
  TrainBlend blend_;              // data.train's corpora and order (one corpus: today's order)
  std::uint64_t blend_start_ = 0; // the global window at which the blend's order began (data.reset_order)
  double last_loss_ = 0;
  std::string data_error_;    // a bad chunk (or read) this rank's loader hit, for the next step's batch
  bool data_failed_ = false;  // agreed at the step boundary: some rank cannot read its next batch
  std::optional<MetricsWindow> window_;  // the steps since the last metrics line (from run())
  health::GpuMonitor gpu_monitor_;
  std::unique_ptr<health::StragglerWatch> stragglers_;  // per logged window: the slowest rank
  dist::TimedCommunicator* timed_comm_ = nullptr;  // comm_, counting the time blocked in collectives
  bool gpu_metrics_ = false;  // some rank has a GPU monitor: every rank joins the reduction of readings
  std::uint64_t predicted_peak_ = 0;     // the memory planner's prediction of the allocator peak
  const tok::Tokenizer* tokenizer_ = nullptr;  // for text samples (log.sample_every): text_tokenizer's
  std::unique_ptr<health::HangNotes> hang_notes_;  // answers and reports hangs from ring_ (ckpt.dir/diag/)
  std::unique_ptr<RlRun> rl_;  // rl.prompts set: the RL run (trainer_rl.cpp)
  std::string base_fingerprint_;  // a full fine-tune's init.from as an export reads it: checkpointed
  std::string reference_sha256_;  // rl.kl_coef's reference (a full actor's initial policy): checkpointed
  std::unique_ptr<Critic> critic_;  // rl.algorithm=ppo
  std::unique_ptr<AnswerEvaluation> answer_eval_;  // log.eval_prompts set
};

}  // namespace zt::train
