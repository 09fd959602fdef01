// The state of an RL run inside the trainer (trainer_rl.cpp), where the trainer's set-up and teardown see it.
#pragma once

#include <memory>
#include <vector>

#include "gen/engine.hpp"
#include "gen/prompt_io.hpp"
#include "model/device_weights.hpp"
#include "rl/batch_rules.hpp"
#include "rl/objectives.hpp"
#include "rl/rewards.hpp"
#include "rl/rollouts.hpp"
#include "train/reference_policy.hpp"
#include "train/trainer.hpp"

namespace zt::train {

// What an RL run holds beside the trainer's model and engine.
struct Trainer::RlRun {
  const tok::Tokenizer* tokenizer = nullptr;
  const std::vector<gen::PromptLine>* prompts = nullptr;  // read_answer_prompts' lines (kept for the process)
  std::vector<std::int32_t> stop_tokens;
  std::unique_ptr<rl::Reward> reward;
  rl::BatchLayout layout;
  rl::Objective objective;
  std::int64_t max_len = 0;                           // prompt + response of one sequence
  gen::EngineOptions engine_options;                  // the rollouts' engine, made per iteration
  std::unique_ptr<ReferencePolicy> reference;         // rl.kl_coef > 0: the initial policy's weights
  rl::UpdatePlan plan;                                // the iteration's forward passes (rl_plan)
};

// The iteration's figures on this rank, summed over the data-parallel ranks for the metrics line.
struct Trainer::RlSums {
  double responses = 0, prompt_tokens = 0, reward = 0, reward_sq = 0, correct = 0, response_tokens = 0, truncated = 0;
  double sampled_nll = 0;  // -log p of every sampled response token (the policy's entropy, estimated)
  double advantage = 0, advantage_sq = 0;
  double policy_loss = 0, kl = 0, clipped = 0;  // summed over the iteration's optimizer steps
  double entropy = 0;  // the policy's aggregated entropy at the response tokens, summed over those steps
  double gen_s = 0, update_s = 0, reward_s = 0;  // this rank's
  // PPO: the value loss and its clipped tokens over the critic's steps; values and returns over the tokens
  double value_loss = 0, value_clipped = 0, values = 0, returns = 0;
  double reward_kl = 0;         // rl.kl_in_reward: the responses' mean per-token KL, summed (verl reward_kl_penalty)
  double critic_grad_norm = 0;  // the last critic step's (the same on every rank: not summed)
  bool actor_trained = false;   // an actor step ran this iteration (not PPO's critic warm-up): entropy is set
  double update_cells = 0;      // an epoch's forward passes' cells (passes x train.micro_batch x model.seq_len)
  std::vector<double> packed() const {
    return {responses, prompt_tokens, reward, reward_sq, correct, response_tokens, truncated, sampled_nll, advantage, advantage_sq,
            policy_loss, kl, clipped, gen_s, update_s, reward_s, value_loss, value_clipped, values, returns, reward_kl,
            entropy, update_cells};
  }
};

}  // namespace zt::train
