// RL post-training, the iteration's data (trainer_rl.cpp runs the loop): this rank's rollouts generated
// and scored, PPO's values and advantages, the rollouts written and dealt again by length, their passes
// planned into micro-batches, and their log-probabilities under the old policy, the reference or the base.
#include <algorithm>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gen/engine.hpp"
#include "gen/prompt_io.hpp"
#include "health/faults.hpp"
#include "io/atomic_file.hpp"
#include "io/json_text.hpp"
#include "rl/balance.hpp"
#include "rl/ppo.hpp"
#include "rl/rewards.hpp"
#include "rl/rollouts.hpp"
#include "train/critic.hpp"
#include "train/trainer_rl.hpp"

namespace zt::train {

// This rank's rollouts of the iteration: mini-batch after mini-batch, each prompt's group together.
std::vector<rl::Rollout> Trainer::rl_generate(RlSums& sums) {
  RlRun& r = *rl_;
  const config::RlConfig& c = config_.rl;
  const std::int64_t iteration = step_;
  const std::vector<std::size_t> prompts = rl::iteration_prompts(r.prompts->size(), config_.train.seed, iteration, c.batch);
  std::vector<gen::Request> requests;
  std::vector<rl::Rollout> rollouts;
  for (std::int64_t position : rl::rank_positions(c.batch, r.layout.mini_batch, r.layout.dp, grid_.dp_rank()))
    for (int s = 0; s < c.group_size; ++s) {
      const std::size_t line = prompts[static_cast<std::size_t>(position)];
      const gen::PromptLine& p = (*r.prompts)[line];
      requests.push_back({p.ids, c.max_new_tokens, r.stop_tokens,
                          rl::response_stream(iteration, c.batch, position, c.group_size, s)});
      rollouts.push_back({.position = position, .line = line, .sample = s, .prompt = p.ids});
      sums.prompt_tokens += static_cast<double>(p.ids.size());
    }
  set_comm_context(cat("iteration ", step_ + 1, " rollouts"));
  health::hang_point(config_.debug, world_.rank(), config::HangPhase::kGenerate, step_ + 1);  // TEST ONLY
  if (lora_) lora_->set_dropout(false);
  const auto t = Clock::now();
  // The engine (its KV cache) lives while the rollouts run. At ZeRO-3 it reads a whole copy of the
  // weights, gathered before the ranks' decoding diverges.
  const std::unique_ptr<GenerationWeights> weights = generation_weights();
  std::vector<gen::Completion> done;
  {
    gen::Engine engine(*backend_, shard_table(), weights->params(), r.engine_options);
    done = engine.run(requests);
  }
  if (placement_.device == config::Device::kCuda) backend_->synchronize();
  sums.gen_s = seconds_since(t);
  for (std::size_t k = 0; k < done.size(); ++k) {
    rollouts[k].response = done[k].tokens;
    rollouts[k].truncated = done[k].finish == gen::Finish::kLength;
    for (float lp : done[k].logprobs) sums.sampled_nll -= lp;
  }
  return rollouts;
}

// The rollouts' texts, their rewards, then GRPO's advantages per group.
void Trainer::rl_score(std::vector<rl::Rollout>& rollouts, RlSums& sums) {
  RlRun& r = *rl_;
  std::vector<rl::RewardInput> inputs;
  for (rl::Rollout& ro : rollouts) {
    const gen::PromptLine& p = (*r.prompts)[ro.line];
    const gen::Completion c{ro.response, {}, ro.truncated ? gen::Finish::kLength : gen::Finish::kStop};
    ro.prompt_text = r.tokenizer->decode(std::vector<std::uint32_t>(ro.prompt.begin(), ro.prompt.end()));
    ro.response_text = gen::completion_text(c, *r.tokenizer, {}, r.stop_tokens);
    inputs.push_back({.prompt = ro.prompt_text, .response = ro.response_text, .reference = p.reference.value_or(""),
                      .id = p.id});
  }
  const auto t = Clock::now();
  const std::vector<double> scores = r.reward->score(inputs);
  sums.reward_s = seconds_since(t);
  for (std::size_t k = 0; k < rollouts.size(); ++k) {
    rollouts[k].reward = scores[k];
    sums.responses += 1, sums.reward += scores[k], sums.reward_sq += scores[k] * scores[k];
    sums.correct += scores[k] >= 1 ? 1 : 0;
    sums.response_tokens += static_cast<double>(rollouts[k].response.size());
    sums.truncated += rollouts[k].truncated ? 1 : 0;
  }
  if (critic_) return;  // PPO: GAE's per-token advantages, once the critic has valued the rollouts (rl_gae)
  rl::assign_group_advantages(rollouts, static_cast<int>(config_.rl.group_size), config_.rl.norm_adv_by_std);
  for (const rl::Rollout& ro : rollouts) sums.advantage += ro.advantage, sums.advantage_sq += ro.advantage * ro.advantage;
}

// The critic's value of every response token, at the position whose output predicts it (the state
// before the token: verl's values[:, -response_length - 1 : -1]), into each rollout's old_values.
void Trainer::rl_values(std::vector<rl::Rollout>& rollouts) {
  const rl::UpdatePlan& plan = rl_->plan;
  for (std::int64_t step = 0; step < static_cast<std::int64_t>(plan.steps.size()); ++step)
    for (std::int64_t m = 0; m < plan.passes(step); ++m) {
      const rl::MicroBatch mb = rl_micro_batch(rollouts, step, m);
      const std::vector<float> values = mb.at_responses(critic_->values(mb));
      for (std::size_t i = 0; i < mb.which.size(); ++i)
        rollouts[mb.which[i]].old_values.assign(values.begin() + mb.offsets[i], values.begin() + mb.offsets[i + 1]);
    }
}

// PPO's advantages: each response's reward on its last token (rl.kl_in_reward: less rl.kl_coef times each
// token's KL of the rollout policy to the reference), GAE over the critic's values, the advantages
// whitened over every response token of the iteration on all data-parallel ranks (one all-reduce of their
// sums), the returns kept unwhitened as the critic's targets (verl's order).
void Trainer::rl_gae(std::vector<rl::Rollout>& rollouts, const std::vector<std::vector<float>>& old_logp,
                     const std::vector<std::vector<float>>& ref_logp, RlSums& sums) {
  rl_values(rollouts);
  const bool penalty = config_.rl.kl_in_reward;
  std::vector<std::int64_t> offsets{0};
  std::vector<float> scores, values, old, ref;
  for (std::size_t i = 0; i < rollouts.size(); ++i) {
    const rl::Rollout& ro = rollouts[i];
    offsets.push_back(offsets.back() + static_cast<std::int64_t>(ro.response.size()));
    scores.push_back(static_cast<float>(ro.reward));
    values.insert(values.end(), ro.old_values.begin(), ro.old_values.end());
    if (!penalty) continue;
    old.insert(old.end(), old_logp[i].begin(), old_logp[i].end());
    ref.insert(ref.end(), ref_logp[i].begin(), ref_logp[i].end());
  }
  const rl::TokenRewards rewards = rl::token_rewards(offsets, scores, old, ref, config_.rl.kl_estimator,
                                                     penalty ? config_.rl.kl_coef : 0.0);
  sums.reward_kl += rewards.kl_mean_sum;
  rl::Gae g = rl::gae(offsets, rewards.rewards, values, config_.rl.gamma, config_.rl.lam);
  std::vector<double> whole = {g.sums.count, g.sums.sum, g.sums.sum_sq};
  set_comm_context(cat("iteration ", step_ + 1, " advantage whitening"));
  dp_comm().all_reduce_values(whole, dist::ReduceOp::kSum);
  rl::whiten(g.advantages, {whole[0], whole[1], whole[2]});
  for (std::size_t i = 0; i < rollouts.size(); ++i) {
    const auto first = g.advantages.begin() + offsets[i], last = g.advantages.begin() + offsets[i + 1];
    rollouts[i].token_advantages.assign(first, last);
    rollouts[i].returns.assign(g.returns.begin() + offsets[i], g.returns.begin() + offsets[i + 1]);
  }
  for (std::size_t k = 0; k < g.advantages.size(); ++k) {
    sums.advantage += g.advantages[k], sums.advantage_sq += g.advantages[k] * g.advantages[k];
    sums.values += values[k], sums.returns += g.returns[k];
  }
}


// rl.rollout_dir: the iteration's rollouts of every data-parallel group gathered on rank 0 and written, in
// the iteration's order (prompt position, then sample), as DIR/step_NNNNNNNN.jsonl (atomic); PPO's with
// their per-token advantages, returns and the critic's values.
void Trainer::rl_write_rollouts(const std::vector<rl::Rollout>& rollouts) {
  std::string mine;
  for (std::size_t k = 0; grid_.tp_rank() == 0 && k < rollouts.size(); ++k) {  // a TP group's first rank speaks for it
    const rl::Rollout& ro = rollouts[k];
    const gen::PromptLine& p = (*rl_->prompts)[ro.line];
    nlohmann::ordered_json line = {{"step", step_ + 1}, {"position", ro.position}, {"sample", ro.sample}, {"id", p.id},
                                   {"prompt_ids", ro.prompt}, {"response_ids", ro.response}, {"prompt", ro.prompt_text},
                                   {"response", ro.response_text}, {"reference", p.reference.value_or("")}, {"reward", ro.reward},
                                   {"advantage", ro.advantage}, {"truncated", ro.truncated}};
    if (!ro.token_advantages.empty()) {  // PPO: GAE's whitened advantages, the critic's targets and its values
      line["token_advantages"] = ro.token_advantages;
      line["returns"] = ro.returns;
      line["old_values"] = ro.old_values;
    }
    // (a prompt_ids prompt may decode to bytes that are no UTF-8, a character cut in two: U+FFFD here)
    mine += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  const std::vector<std::string> parts = world_.gather_to_root(mine, "rl.rollout_dir: the rollouts gathered on rank 0");
  if (!world_.is_root()) return;
  std::vector<std::pair<std::pair<std::int64_t, int>, std::string>> lines;
  for (const std::string& part : parts) {
    std::istringstream in(part);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      lines.push_back({{j["position"].get<std::int64_t>(), j["sample"].get<int>()}, line});
    }
  }
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const auto& [key, line] : lines) text += line + "\n";
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld.jsonl", static_cast<long long>(step_ + 1));
  const std::string path = (std::filesystem::path(config_.rl.rollout_dir) / name).string();
  try {
    std::filesystem::create_directories(config_.rl.rollout_dir);
    io::write_file_atomic(path, text);
  } catch (const std::exception& e) {  // a disk that filled or went away mid-run
    throw IoError(cat("rl.rollout_dir=", config_.rl.rollout_dir, ": writing ", path, " failed: ", e.what(),
                      " (free space there, or leave rl.rollout_dir empty)"));
  }
}

// rl.balance_rollouts (rl/balance.hpp): every data-parallel rank's rollouts gathered and each optimizer
// step's dealt again by length; this rank keeps its own, in (position, sample) order. The ranks of a
// tensor-parallel group hold the same rollouts: its first rank speaks for it. Packed passes only: one
// rollout a row, every rank runs the batch rules' equal count whatever the lengths.
void Trainer::rl_balance(std::vector<rl::Rollout>& rollouts) {
  const rl::BatchLayout& b = rl_->layout;
  if (!config_.rl.balance_rollouts || !config_.rl.pack_rollouts || b.dp == 1) return;
  const std::string what = cat("iteration ", step_ + 1, " rollouts dealt for the update");
  std::string all;
  for (const std::string& part : world_.gather_to_root(grid_.tp_rank() == 0 ? rl::to_wire(rollouts) : "", what)) all += part;
  std::vector<rl::Rollout> every = rl::from_wire(world_.broadcast_from_root(all, what), *rl_->prompts);
  const std::vector<int> ranks = rl::balanced_ranks(every, b.mini_batch, b.dp);
  std::vector<rl::Rollout> mine;
  for (std::size_t k = 0; k < every.size(); ++k)
    if (ranks[k] == grid_.dp_rank()) mine.push_back(std::move(every[k]));
  std::sort(mine.begin(), mine.end(), [](const rl::Rollout& x, const rl::Rollout& y) {
    return x.position != y.position ? x.position < y.position : x.sample < y.sample;
  });
  rollouts = std::move(mine);
}

// The iteration's passes on this rank (packed or one rollout a row, rl.pack_rollouts), as many per
// optimizer step as the data-parallel group's most (empty ones where this rank has fewer: their
// collectives still run).
void Trainer::rl_plan(const std::vector<rl::Rollout>& rollouts) {
  const rl::BatchLayout& b = rl_->layout;
  rl::UpdatePlan plan = rl::plan_update(rollouts, rl::step_sizes(rollouts, b.steps_per_epoch(), b.mini_batch), b.micro_batch,
                                        config_.model.seq_len,
                                        config_.rl.pack_rollouts);
  std::vector<double> counts;
  for (std::int64_t s = 0; s < b.steps_per_epoch(); ++s) counts.push_back(static_cast<double>(plan.passes(s)));
  set_comm_context(cat("iteration ", step_ + 1, " forward passes per optimizer step"));
  dp_comm().all_reduce_values(counts, dist::ReduceOp::kMax);
  std::vector<std::int64_t> most;
  std::int64_t empty = 0;
  for (std::int64_t s = 0; s < b.steps_per_epoch(); ++s) {
    most.push_back(static_cast<std::int64_t>(counts[static_cast<std::size_t>(s)]));
    empty += most.back() - plan.passes(s);
  }
  if (empty > 0)
    log::info(cat("iteration ", step_ + 1, ": ", empty, " empty forward pass(es) on data-parallel rank ", grid_.dp_rank(),
                   " to its group's count of packed passes"));
  plan.pad_to(most);
  rl_->plan = std::move(plan);
}

rl::MicroBatch Trainer::rl_micro_batch(const std::vector<rl::Rollout>& rollouts, std::int64_t step, std::int64_t m) const {
  const rl::BatchLayout& b = rl_->layout;
  return rl::pack(rollouts, rl_->plan.steps[static_cast<std::size_t>(step)][static_cast<std::size_t>(m)],
                  static_cast<int>(b.micro_batch), config_.model.seq_len, b.group, step_ * b.batch * b.group);
}

// Every response token's log-probability, per rollout (a forward pass per micro-batch, no backward), under
// the policy before the iteration's first update (the PPO ratio's old policy), the reference
// (ReferencePolicy), or a LoRA actor's base alone (its KL reference).
std::vector<std::vector<float>> Trainer::rl_logprobs(const std::vector<rl::Rollout>& rollouts, LogprobsOf of) {
  const rl::UpdatePlan& plan = rl_->plan;
  if (of == LogprobsOf::kBase) model_->set_lora(nullptr);
  std::vector<std::vector<float>> out(rollouts.size());
  for (std::int64_t step = 0; step < static_cast<std::int64_t>(plan.steps.size()); ++step)
    for (std::int64_t m = 0; m < plan.passes(step); ++m) {
      const rl::MicroBatch mb = rl_micro_batch(rollouts, step, m);
      if (of == LogprobsOf::kPolicy) expect_access_order(false);
      model::ParamSource& params = of == LogprobsOf::kReference ? rl_->reference->params() : *params_;
      if (lora_) lora_->set_dropout(false);
      rl::use_layout(*model_, mb);
      model_->forward(mb.tokens.data(), mb.targets.data(), params);
      const std::vector<float> losses = mb.at_responses(model_->token_losses());
      for (std::size_t i = 0; i < mb.which.size(); ++i)
        for (std::int64_t k = mb.offsets[i]; k < mb.offsets[i + 1]; ++k)
          out[mb.which[i]].push_back(-losses[static_cast<std::size_t>(k)]);
    }
  if (of == LogprobsOf::kBase) model_->set_lora(&lora_->lora());
  return out;
}


}  // namespace zt::train
