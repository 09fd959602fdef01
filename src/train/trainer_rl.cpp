// RL post-training (rl.prompts set; docs/guide/rl.md): the trainer's loop when each step is an RL
// iteration. An iteration: this rank's share of the iteration's prompts (rl/rollouts.hpp) through the
// generation engine on the trainer's own weights (no export, no copy), the responses scored (rl.reward),
// GRPO's advantages per prompt group, then rl.epochs passes in optimizer steps over mini-batches of
// micro-batches, each token's cross-entropy weighted by the objective's gradient (rl/objectives.hpp,
// Model::set_loss_weights), reduced and applied as any training step is. A checkpoint after an
// iteration holds everything a resume needs (PPO's critic too, in critic/): the prompt cursor and the
// sampling streams follow from the iteration number.
#include <algorithm>
#include <exception>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "ckpt/layout.hpp"
#include "ckpt/reader.hpp"
#include "config/options.hpp"
#include "core/log.hpp"
#include "dist/deadline.hpp"
#include "gen/engine.hpp"
#include "gen/prompt_io.hpp"
#include "health/faults.hpp"
#include "model/family.hpp"
#include "model/from_config.hpp"
#include "model/initial_weights.hpp"
#include "plan/memory_plan.hpp"
#include "rl/batch_rules.hpp"
#include "rl/objectives.hpp"
#include "rl/ppo.hpp"
#include "rl/rewards.hpp"
#include "rl/rollouts.hpp"
#include "train/critic.hpp"
#include "train/prompt_check.hpp"
#include "train/signals.hpp"
#include "train/shared_input.hpp"
#include "train/trainer_rl.hpp"

namespace zt::train {
namespace {
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The way back to a run's KL reference that a resume's configuration no longer gives: without init.from
// the reference is train.seed's initialisation, so the checkpoint's seed is named (outside sweep 37 F7: the
// message said to put the model back at init.from, which the run never had).
std::string other_reference_fix(const config::Config& c, const std::string& sha256, const ckpt::TrainState& then) {
  const std::string changed = cat(" now has sha256 ", sha256);
  if (!c.init.from.empty())
    return cat("init.from=", c.init.from, changed,
               ": put the run's initial model back there, or start a new run (another ckpt.dir)");
  if (then.seed != c.train.seed)
    return cat("train.seed=", c.train.seed, "'s initialisation (no init.from)", changed,
               "; the run was trained with train.seed=", then.seed, ": resume with train.seed=", then.seed,
               ", or start a new run (another ckpt.dir)");
  return cat("train.seed=", c.train.seed, "'s initialisation (no init.from)", changed,
             ": give the run's init.from again, or start a new run (another ckpt.dir)");
}
}  // namespace

void Trainer::open_rl(const ResumePoint& resume) {
  rl_ = std::make_unique<RlRun>();
  RlRun& r = *rl_;
  const config::RlConfig& c = config_.rl;
  r.tokenizer = &text_tokenizer(config_, "rl.reward");
  r.prompts = &read_answer_prompts(config_, PromptSet::kRl);  // checked at start-up
  r.max_len = max_sequence_len(config_, *r.prompts, c.max_new_tokens, "rl.prompts");
  const std::int64_t longest = longest_prompt(*r.prompts);  // the prefill chunk
  // The plan's rollouts at their known length (the start-up plan bounded them by model.seq_len).
  predicted_peak_ = plan::plan_memory(config_, world_.size(), placement_.threads, 0, placement_.device,
                                      {.rollouts = r.max_len, .rollout_prompt = longest})
                        .total_bytes;
  r.stop_tokens = gen::end_tokens(*r.tokenizer, gen::template_of_tokenizer(r.tokenizer));
  r.layout = rl::layout_of(config_, static_cast<int>(derived_.dp_size));
  r.objective = {.algorithm = c.algorithm, .clip_low = c.clip_ratio,
                 .clip_high = c.clip_ratio_high > 0 ? c.clip_ratio_high : c.clip_ratio,
                 .kl_coef = c.kl_in_reward ? 0.0 : c.kl_coef,  // in the reward instead (rl_gae)
                 .kl = c.kl_estimator, .aggregation = c.loss_agg, .entropy_coeff = c.entropy_coeff};
  r.reward = rl::make_reward(c.reward, c.reward_timeout_s);
  gen::EngineOptions e = rl::engine_options(config_, r.max_len, derived_.dp_size, longest);
  e.tp_group = grid_comms_.tp.get();
  if (lora_) e.lora = &lora_->attach_generation(gen::forward_rows(e));  // the actor: base + live adapters
  e.drawable = static_cast<std::int64_t>(std::min<std::uint64_t>(r.tokenizer->n_ids(), config_.model.vocab_size));
  r.engine_options = e;
  if (c.kl_coef > 0 && !lora_) r.reference = reference_policy(resume);  // a LoRA actor's is its base
  if (c.algorithm == config::RlAlgorithm::kPpo) {
    critic_ = std::make_unique<Critic>(*backend_, config_, dp_comm(), grid_comms_.tp.get(), grid_, offload_threads());
    checkpointer_->add_critic(critic_->table(), critic_->engine(), critic_->shard_map());
    // A resume's critic is the checkpoint's (check_rl_resume made sure it holds one): weights and moments.
    if (resume.empty()) critic_->init(world_);
    else checkpointer_->load_critic(resume.dir);
    const std::string from = !resume.empty() ? cat(resume.dir.string(), "/", ckpt::kCriticDir)
                             : config_.init.from.empty() ? "train.seed's initialisation" : config_.init.from;
    log::info(cat("rl: PPO's critic: ", model::family_of(table_.shape().arch).display, " with a value head, from ",
                  from, ", lr ", c.critic_lr > 0 ? c.critic_lr : config_.optim.lr, ", GAE gamma ", c.gamma, " lambda ",
                  c.lam, c.critic_warmup > 0 ? cat(", the actor frozen for ", c.critic_warmup, " iteration(s)") : "",
                  "; checkpointed with the actor (", ckpt::kCriticDir, "/)"));
  }
  log::info(rl::describe(r.layout));
  log::info(cat("rl: ", config::to_string(c.algorithm), " on ", r.prompts->size(), " prompts (", c.prompts, "), reward ",
                r.reward->describe(), "; responses up to ", c.max_new_tokens,
                " tokens (sequences of ", r.max_len, "), ", r.engine_options.slots, " decoded together per rank",
                c.kl_coef > 0 ? cat("; KL to the initial policy x ", c.kl_coef, c.kl_in_reward ? " in the reward" : " in the loss",
                                    r.reference && r.reference->sharded() ? " (the reference sharded, ZeRO-3)" : "")
                              : "",
                c.pack_rollouts ? cat("; the update packs rollouts several to a row of ", config_.model.seq_len,
                                      " (rl.pack_rollouts)")
                                : "; the update takes one rollout a row (rl.pack_rollouts=false)"));
}

// The initial policy (init.from, else train.seed's initialisation): this rank's part in the compute dtype,
// sharded over the data-parallel group at ZeRO-3 (reference_policy.hpp). Read again at every start, its hash
// is checkpointed, so that a resume whose init.from now holds other weights (a download of a newer revision,
// an export made again there) is refused rather than measure the KL to another model. A checkpoint without
// one (written before) is not checked.
std::unique_ptr<ReferencePolicy> Trainer::reference_policy(const ResumePoint& resume) {
  std::string recorded;
  std::optional<ckpt::TrainState> then;
  if (!resume.empty()) then = ckpt::Checkpoint(resume.dir).state(), recorded = then->rl_reference_sha256;
  std::unique_ptr<ReferencePolicy> reference;
  read_shared_input(world_, [&] {  // range by range (model::InitialWeights): no whole-model copy on the host
    const model::InitialWeights weights(config_.init.from, table_, config_.train.seed);
    reference_sha256_ = weights.sha256();
    if (!recorded.empty() && recorded != reference_sha256_)
      throw InputError(cat(resume.dir.string(), ": this run's KL reference (rl.kl_coef, its initial policy) had sha256 ",
                           recorded, ", but ", other_reference_fix(config_, reference_sha256_, *then)));
    reference = std::make_unique<ReferencePolicy>(*backend_, config_, shard_table(), shard_map_ ? &*shard_map_ : nullptr,
                                                  dp_comm(), engine_units_,
                                                  [&](std::int64_t offset, std::int64_t count, float* out) {
                                                    weights.read(offset, count, out);
                                                  });
  }, cat("init.from=", config_.init.from, " (rl.kl_coef's reference)"));
  return reference;
}

// ZeRO-3: every unit gathered once, in unit order, on every rank of the data-parallel group, into one
// compute-dtype copy of this rank's part of the model (as verl's hybrid engine hands its rollout engine
// full weights gathered from FSDP's shards); a LoRA run's base (its NF4 bytes) and adapters likewise. The
// caller holds it while it generates.
std::unique_ptr<GenerationWeights> Trainer::generation_weights() {
  auto g = std::make_unique<GenerationWeights>();
  g->base = params_.get();
  if (config_.train.zero_stage != 3) return g;
  const DType dtype = model::compute_dtype(config_.train.precision);
  if (!lora_) {
    g->whole = optim::gather_whole(*backend_, *engine_, shard_table(), dtype);
    g->base = &g->whole->params();
    return g;
  }
  if (lora_->nf4()) {
    g->nf4 = lora_->nf4_base().gathered_whole();
    g->base = g->nf4.get();
  } else {
    g->whole = optim::gather_whole(*backend_, lora_->base_engine(), shard_table(), dtype);
    g->base = &g->whole->params();
  }
  g->adapters = optim::gather_whole(*backend_, *engine_, lora_->adapter_part(), dtype);
  lora_->bind_generation(&g->adapters->params());
  g->lora = lora_.get();
  return g;
}

int Trainer::rl_loop() {
  const std::int64_t last = config_.train.stop_at_step > 0 ? config_.train.stop_at_step : config_.train.max_steps;
  if (step_ >= last) {
    log::info(cat("nothing to train: the run is at iteration ", step_, " and stops at ", last, " (train.max_steps)"));
    return record_exit(kExitOk, "nothing to train");
  }
  const std::int64_t first = step_ + 1;
  if (stopped_before_first_step()) return record_exit(kExitRequeue, stop_reason());
  while (step_ < last) {
    const StepResult r = rl_iteration();
    if (r.abandoned) return rl_stop_after_abandoned_iteration();
    if (!std::isfinite(r.loss) && !r.skipped) {  // every rank sees the same all-reduced loss
      checkpointer_->commit_before_failing("before stopping");
      throw Error(cat("the RL loss became ", r.loss, " at iteration ", step_, ": lower optim.lr or rl.clip_ratio"));
    }
    if (step_ == first) {
      set_comm_timeout(config_.dist.timeout_s);
      world_.set_timeout(config_.dist.timeout_s);
    }
    health::inject_faults(config_.debug, world_.rank(), step_);
    if (at_step_boundary(last)) {
      checkpointer_->finish();
      log::info(stopped_line("iteration"));
      return record_exit(kExitRequeue, stop_reason());
    }
  }
  checkpointer_->finish();
  log::info(cat("done: ", step_, " RL iterations"));
  return record_exit(kExitOk, "done");
}

int Trainer::rl_stop_after_abandoned_iteration() {
  checkpointer_->finish();
  const fs::path newest = fs::path(config_.ckpt.dir) / ckpt::step_dir_name(step_) / ckpt::kManifestFile;
  std::error_code ec;
  const bool saved = world_.max_over_ranks(world_.is_root() && fs::exists(newest, ec) ? 1 : 0,
                                           cat("iteration ", step_ + 1, " given up (is step ", step_, " saved?)")) != 0;
  if (step_ > 0 && !saved) checkpointer_->save(train_state());
  checkpointer_->finish();
  log::info(cat("stopped after iteration ", step_, " on ", stop_reason(), " (iteration ", step_ + 1, " given up), ",
                step_ == 0 ? "nothing trained" : "checkpointed", ": exit ", kExitRequeue,
                " (requeue; ckpt.resume=auto continues from here)"));
  return record_exit(kExitRequeue, stop_reason());
}

bool Trainer::rl_score_or_stop(std::vector<rl::Rollout>& rollouts, RlSums& sums) {
  std::int32_t ended = 0;  // 1: a program ended by the job's stop signal; 2: a reward failed (the run stops, exit 1)
  std::exception_ptr failure;
  try {
    rl_score(rollouts, sums);
  } catch (const rl::RewardProgramEnded& e) {
    // A program that ended is what a whole-job stop signal does to it; its other faults (a bad answer, a
    // timeout) are its own and stop the run (exit 1) even during a stop. The job's signal may reach ztrain
    // just after the program it killed: a moment to see it.
    const auto until = Clock::now() + std::chrono::seconds(2);
    while (stop_signal_received() == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (stop_signal_received() == 0) {
      failure = std::current_exception(), ended = 2;
    } else {
      log::warn(cat("rank ", world_.rank(), ": ", e.what(), " -- during a stop (", stop_reason(), "), which reaches the ",
                    "whole job: iteration ", step_ + 1, " is given up, nothing of it applied"));
      ended = 1;
    }
  } catch (const std::exception&) {  // a crash, a timeout, a bad answer: agreed on below, then the run stops
    failure = std::current_exception(), ended = 2;
  }
  // The ranks meet after their reward programs, whose time differs per rank (responses of other lengths,
  // a judge model on a slower node) while each program keeps its own rl.reward_timeout_s: the start-up's
  // loose deadline for this one agreement, not a step's. Built-in rewards take microseconds: a step's.
  const bool programs = config_.rl.reward.rfind("command:", 0) == 0;
  set_comm_context(cat("iteration ", step_ + 1, " scored", programs ? " (the ranks meet after their reward programs: a rank "
                                                                      "missing here may still be scoring)" : ""));
  const double step_timeout_s = comm_->timeout_s(), loose_s = dist::kStartUpFactor * config_.dist.timeout_s;
  const std::string step_words = comm_->limit_words();
  if (programs && loose_s > step_timeout_s)
    set_comm_timeout(loose_s, cat(loose_s, " s (the reward phase, whose time differs per rank: ", dist::kStartUpFactor,
                                  " x dist.timeout_s=", config_.dist.timeout_s, " s; raise dist.timeout_s for larger differences)"));
  agree_max(&ended, 1);
  set_comm_timeout(step_timeout_s, step_words);
  if (ended == 2) {  // every rank stops here, the last checkpoint committed first (outside sweep 37 F8)
    checkpointer_->commit_before_failing("before stopping");
    if (failure) std::rethrow_exception(failure);
    throw Error(cat("iteration ", step_ + 1, ": a reward failed on another rank (its error is in that rank's log); ",
                    "stopping with it"));
  }
  return ended == 0;
}

// One critic step over mini-batch `step`: per micro-batch its values, the clipped value loss against the
// returns (the whole mini-batch's totals), its gradient per value into the critic's backward; then the
// reduction, clip and AdamW at rl.critic_lr.
double Trainer::rl_critic_update(const std::vector<rl::Rollout>& rollouts, std::int64_t step, std::int64_t total_tokens,
                                 std::int64_t adam_step, RlSums& sums) {
  const rl::BatchLayout& b = rl_->layout;
  const rl::ValueObjective objective{.clip = config_.rl.cliprange_value, .aggregation = config_.rl.loss_agg};
  critic_->zero_grads();
  const std::int64_t passes = rl_->plan.passes(step);
  for (std::int64_t m = 0; m < passes; ++m) {
    const rl::MicroBatch mb = rl_micro_batch(rollouts, step, m);
    set_comm_context(cat("iteration ", step_ + 1, " critic update ", step + 1, " micro-batch ", m + 1, "/", passes));
    const std::vector<float> values = mb.at_responses(critic_->forward_for_update(mb));
    std::vector<float> old_values, returns;
    for (const std::size_t row : mb.which) {
      const rl::Rollout& ro = rollouts[row];
      old_values.insert(old_values.end(), ro.old_values.begin(), ro.old_values.end());
      returns.insert(returns.end(), ro.returns.begin(), ro.returns.end());
    }
    const rl::ValueLoss loss = mb.which.empty() ? rl::ValueLoss{}  // an empty pass: no gradient, its collectives
                                                : rl::value_loss(objective, {mb.offsets, values, old_values, returns,
                                                                             total_tokens, b.sequences_per_step()});
    sums.value_loss += loss.loss, sums.value_clipped += static_cast<double>(loss.clipped_tokens);
    critic_->backward(mb.to_positions(loss.gradient), m == passes - 1);
  }
  set_comm_context(cat("iteration ", step_ + 1, " critic update ", step + 1, " optimizer"));
  return critic_->step(step_, adam_step);
}

Trainer::StepResult Trainer::rl_iteration() {
  RlRun& r = *rl_;
  const rl::BatchLayout& b = r.layout;
  RlSums sums;
  std::vector<rl::Rollout> rollouts = rl_generate(sums);
  // The ranks meet once their shares are generated, at a step's deadline (dist.timeout_s holds the
  // ranks' generation times apart, as torch's collective timeout does verl's): a rank stopped or lost
  // while generating is found here, not after the reward phase's 10 x dist.timeout_s.
  set_comm_context(cat("iteration ", step_ + 1, " rollouts generated (the ranks meet after generating their shares: a ",
                       "rank missing here may still be generating)"));
  std::int32_t generated = 0;
  agree_max(&generated, 1);
  if (!rl_score_or_stop(rollouts, sums)) return StepResult{.abandoned = true};
  const auto t = Clock::now();
  rl_balance(rollouts);
  rl_plan(rollouts);
  // The log-probabilities, ratio, KL and entropy of the distribution the rollouts were drawn from (verl's
  // logits / rollout temperature); greedy rollouts (0) leave the logits as they are.
  model_->set_logit_temperature(config_.rl.temperature > 0 ? static_cast<float>(config_.rl.temperature) : 1.0f);
  for (std::int64_t s = 0; s < b.steps_per_epoch(); ++s)
    sums.update_cells += static_cast<double>(r.plan.passes(s) * b.micro_batch * config_.model.seq_len);
  // The aggregation's denominators: each optimizer step's response tokens over all ranks (one all-reduce).
  std::vector<double> step_tokens(static_cast<std::size_t>(b.steps_per_epoch()), 0.0);
  for (const rl::Rollout& ro : rollouts)
    step_tokens[static_cast<std::size_t>(ro.position / b.mini_batch)] += static_cast<double>(ro.response.size());
  set_comm_context(cat("iteration ", step_ + 1, " token counts"));
  dp_comm().all_reduce_values(step_tokens, dist::ReduceOp::kSum);
  const std::int64_t updates = b.steps_per_epoch() * config_.rl.epochs;
  std::vector<std::vector<float>> old_logp, ref_logp;
  // The first step's forward would equal it; the reward's KL penalty needs it before.
  if (updates > 1 || config_.rl.kl_in_reward) old_logp = rl_logprobs(rollouts, LogprobsOf::kPolicy);
  if (r.reference) ref_logp = rl_logprobs(rollouts, LogprobsOf::kReference);
  else if (config_.rl.kl_coef > 0) ref_logp = rl_logprobs(rollouts, LogprobsOf::kBase);
  if (critic_) rl_gae(rollouts, old_logp, ref_logp, sums);
  if (!config_.rl.rollout_dir.empty()) rl_write_rollouts(rollouts);  // after GAE: PPO's per-token arrays too
  // PPO's critic warm-up: the first rl.critic_warmup iterations train the critic alone.
  const bool actor_trains = !critic_ || step_ >= config_.rl.critic_warmup;
  const std::int64_t actor_first = critic_ ? std::min(step_, config_.rl.critic_warmup) : 0;  // iterations it sat out
  StepResult result;
  result.lr = optim::learning_rate(config_.optim, config_.train.max_steps, step_);
  for (std::int64_t u = 0; u < updates; ++u) {
    const std::int64_t step = u % b.steps_per_epoch();
    const auto total = static_cast<std::int64_t>(step_tokens[static_cast<std::size_t>(step)]);
    if (critic_) sums.critic_grad_norm = rl_critic_update(rollouts, step, total, step_ * updates + u + 1, sums);
    if (!actor_trains) continue;
    const StepResult s = rl_update(rollouts, step, total, old_logp, ref_logp, (step_ - actor_first) * updates + u + 1,
                                   result.lr, sums);
    result.loss += s.loss / static_cast<double>(updates);
    result.grad_norm = s.grad_norm, result.skipped = s.skipped, result.loss_scale = s.loss_scale;
  }
  model_->set_segment_starts(nullptr);  // the next user of the model (evaluation, sampling): one sequence a row
  model_->set_positions(nullptr);
  model_->set_logit_temperature(1.0f);
  if (placement_.device == config::Device::kCuda) backend_->synchronize();
  sums.update_s = seconds_since(t);
  ++step_;
  tokens_ += static_cast<std::uint64_t>(sums.response_tokens);
  last_loss_ = result.loss;
  rl_log(result, sums);
  return result;
}

// One optimizer step over mini-batch `step` of the iteration: its micro-batches' weighted forward and
// backward, the reduction, the clip and AdamW. `total_tokens`: the mini-batch's response tokens over all ranks.
Trainer::StepResult Trainer::rl_update(const std::vector<rl::Rollout>& rollouts, std::int64_t step, std::int64_t total_tokens,
                                       const std::vector<std::vector<float>>& old_logp,
                                       const std::vector<std::vector<float>>& ref_logp, std::int64_t adam_step, double lr,
                                       RlSums& sums) {
  const rl::BatchLayout& b = rl_->layout;
  const double loss_scale = scaler_.scale();
  StepResult r;
  engine_->zero_grads();
  double loss_here = 0;
  const std::int64_t passes = rl_->plan.passes(step);
  for (std::int64_t m = 0; m < passes; ++m) {
    const rl::MicroBatch mb = rl_micro_batch(rollouts, step, m);
    set_comm_context(cat("iteration ", step_ + 1, " update ", step + 1, " micro-batch ", m + 1, "/", passes));
    expect_access_order(true);
    if (lora_) lora_->set_dropout_rows(mb.dropout_rows);
    rl::use_layout(*model_, mb);
    model_->set_loss_weights(nullptr);
    model_->set_entropy_weights(nullptr);
    model_->set_entropy(true);  // the entropy bonus and the metric: the policy's whole distribution
    model_->forward(mb.tokens.data(), mb.targets.data(), *params_);
    const rl::MicroObjective o = rl::micro_objective(rl_->objective, mb, rollouts, mb.which, model_->token_losses(), old_logp,
                                                     ref_logp, total_tokens, b.sequences_per_step(),
                                                     model_->token_entropies());
    const rl::Evaluated& e = o.evaluated;
    loss_here += e.loss;
    sums.policy_loss += e.policy_loss, sums.kl += e.kl, sums.clipped += static_cast<double>(e.clipped_tokens);
    sums.entropy += e.entropy, sums.actor_trained = true;
    model_->set_loss_weights(o.loss_weights.data());
    model_->set_entropy_weights(o.entropy_weights.empty() ? nullptr : o.entropy_weights.data());
    engine_->begin_backward(m == passes - 1);
    model_->backward(*params_, *grads_, static_cast<float>(loss_scale));
    engine_->end_backward();
  }
  model_->set_loss_weights(nullptr);
  model_->set_entropy_weights(nullptr);
  model_->set_entropy(false);
  set_comm_context(cat("iteration ", step_ + 1, " update ", step + 1, " gradient reduction"));
  r.grad_norm = engine_->finish_gradients();
  if (const ShardMap* map = trained_map())
    r.grad_norm = grid_grad_norm(r.grad_norm, *engine_, grid_.tp > 1 ? grid_comms_.tp.get() : nullptr,
                                 map->replicated_ranges(), nullptr, map->tied_copy_ranges());
  r.grad_norm /= loss_scale;
  r.loss = dp_comm().all_reduce_value(loss_here, dist::ReduceOp::kSum);
  r.loss_scale = loss_scale;
  r.skipped = !scaler_.update(std::isfinite(r.grad_norm));
  if (r.skipped) return r;
  set_comm_context(cat("iteration ", step_ + 1, " update ", step + 1, " optimizer"));
  engine_->adamw_step(config_.optim, lr, static_cast<int>(adam_step - scaler_.skipped_steps()),
                      optim::clip_factor(r.grad_norm, config_.optim.grad_clip) / loss_scale);
  return r;
}

// The iteration's metrics line (rank 0), from every data-parallel rank's sums.
void Trainer::rl_log(const StepResult& r, const RlSums& mine) {
  std::vector<double> v = mine.packed();
  std::vector<double> slowest = {mine.gen_s, mine.update_s, mine.reward_s};
  set_comm_context(cat("iteration ", step_, " metrics"));
  dp_comm().all_reduce_values(v, dist::ReduceOp::kSum);
  dp_comm().all_reduce_values(slowest, dist::ReduceOp::kMax);
  const auto peak = static_cast<std::uint64_t>(
      comm_->all_reduce_value(static_cast<double>(backend_->memory_stats().peak_bytes), dist::ReduceOp::kMax));
  if (!metrics_) return;
  enum { kResponses, kPromptTokens, kReward, kRewardSq, kCorrect, kTokens, kTruncated, kNll, kAdv, kAdvSq, kPolicy,
         kKl, kClipped, kGenS, kUpdateS, kRewardS, kValueLoss, kValueClipped, kValues, kReturns, kRewardKl, kEntropy,
         kUpdateCells };
  const double n = std::max(1.0, v[kResponses]), tokens = std::max(1.0, v[kTokens]);
  const double updates = static_cast<double>(rl_->layout.steps_per_epoch() * config_.rl.epochs);
  RlMetrics m;
  m.step = step_, m.lr = r.lr, m.grad_norm = r.grad_norm, m.loss = r.loss;
  m.reward_mean = v[kReward] / n;
  m.reward_std = std::sqrt(std::max(0.0, v[kRewardSq] / n - m.reward_mean * m.reward_mean));
  m.accuracy = v[kCorrect] / n, m.response_length = v[kTokens] / n, m.truncated_fraction = v[kTruncated] / n;
  // The policy's entropy at the update's forwards (verl's actor/entropy); while PPO's critic warms up
  // alone, the sampled tokens' mean -log p estimates it.
  m.entropy = mine.actor_trained ? v[kEntropy] / updates : v[kNll] / tokens;
  const double per = critic_ ? tokens : n;  // PPO's advantages are per token, GRPO's per response
  m.advantage_mean = v[kAdv] / per;
  m.advantage_std = std::sqrt(std::max(0.0, v[kAdvSq] / per - m.advantage_mean * m.advantage_mean));
  if (critic_) {
    m.critic = true;
    m.value_loss = v[kValueLoss] / updates;
    m.value_clip_fraction = v[kValueClipped] / (tokens * static_cast<double>(config_.rl.epochs));
    m.critic_grad_norm = mine.critic_grad_norm;
    m.values_mean = v[kValues] / tokens, m.returns_mean = v[kReturns] / tokens;
  }
  m.pg_loss = v[kPolicy] / updates;
  m.kl = config_.rl.kl_in_reward ? v[kRewardKl] / n : v[kKl] / updates;  // the reward's penalty, or the loss's term
  m.clip_fraction = v[kClipped] / (tokens * static_cast<double>(config_.rl.epochs));
  m.gen_s = slowest[0], m.update_s = slowest[1], m.reward_s = slowest[2];
  // Tokens processed per second per rank, each rank's own time summed: generation counts prompts and
  // responses (prefill and decode), the update the sequences' tokens of every forward and backward pass.
  const double sequence_tokens = v[kPromptTokens] + v[kTokens];
  m.gen_tokens_per_s = sequence_tokens / std::max(1e-9, v[kGenS]);
  m.train_tokens_per_s = sequence_tokens * static_cast<double>(config_.rl.epochs) / std::max(1e-9, v[kUpdateS]);
  m.update_fill = sequence_tokens / std::max(1.0, v[kUpdateCells]);
  m.mem_peak_bytes = peak, m.mem_predicted_bytes = predicted_peak_;
  m.skipped = r.skipped;
  metrics_->rl_iteration(m);
}

}  // namespace zt::train
