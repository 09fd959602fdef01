// PPO's host arithmetic besides the policy loss (issue 33), over a batch of responses' tokens laid out as
// rl::Tokens (token t of response i is element offsets[i] + t). Names and semantics follow verl
// (trainer/ppo/core_algos.py, trainer/ppo/ray_trainer.py, utils/torch_functional.py):
//   token-level rewards  the response's score on its last token, minus kl_coef times the per-token KL of
//                        the rollout policy to the reference (apply_kl_penalty, use_kl_in_reward);
//   GAE                  delta_t = r_t + gamma v_{t+1} - v_t (v past the last token 0),
//                        A_t = delta_t + gamma lambda A_{t+1}, returns R_t = A_t + v_t
//                        (compute_gae_advantage_return), then the advantages whitened over every
//                        response token of the batch (masked_whiten, shift_mean=True, unbiased variance);
//   the value loss       0.5 agg(max((v - R)^2, (clip(v, v_old - c, v_old + c) - R)^2))
//                        (compute_value_loss), with its gradient in each value.
// v_t is the critic's value at the position whose logits predict response token t (verl's
// values[:, -response_length - 1 : -1]), i.e. the state before the token: MicroBatch::positions.
// PPO's policy loss is rl::evaluate (objectives.hpp) with Tokens::token_advantages.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rl/objectives.hpp"

namespace zt::rl {

// verl's token_level_rewards: each response's score on its last token, minus kl_coef * KL_t on every
// token, KL_t = kl_term(kl, old_logp_t, ref_logp_t).value (verl's algorithm.kl_penalty, default "kl" = k1,
// on the rollout policy's log-probabilities). kl_coef 0: no penalty, ref_logp unread (may be empty).
struct TokenRewards {
  std::vector<float> rewards;  // per token
  // The sum over these responses of their mean per-token KL: over all responses, / their count, it is
  // verl's actor/reward_kl_penalty (sum it across ranks first). 0 when kl_coef is 0.
  double kl_mean_sum = 0;
};
TokenRewards token_rewards(std::span<const std::int64_t> offsets, std::span<const float> scores,
                           std::span<const float> old_logp, std::span<const float> ref_logp, KlEstimator kl,
                           double kl_coef);

// The sums that whitening needs, over some response tokens. Whitening a batch split across ranks (or
// computed in parts) is two-phase: each part's sums (whitening_sums), summed over all parts (the caller's
// all-reduce of {count, sum, sum_sq}), then whiten() of each part with the total: every part is then
// whitened exactly as the whole batch would be.
struct WhiteningSums {
  double count = 0, sum = 0, sum_sq = 0;
  WhiteningSums& operator+=(const WhiteningSums& o);
};
WhiteningSums whitening_sums(std::span<const float> x);

// verl's masked_whiten(x, mask, shift_mean=True) with the whole batch's sums: (x - mean) / sqrt(var + 1e-8),
// mean = sum / (count + 1e-8), var the unbiased variance (masked_var: the mean square about the mean times
// count / (count - 1)). From sums in double, so a part needs nothing but the totals; the sum of squares
// about the mean loses digits only when |mean| is many orders above the spread. Throws when count < 2
// (verl raises there too: the unbiased variance divides by count - 1).
void whiten(std::span<float> x, const WhiteningSums& whole);

// GAE over each response's tokens (compute_gae_advantage_return before its whitening). `advantages` are
// raw here: whiten them next (whiten(advantages, the batch's sums)); `returns` are the critic's targets,
// taken before whitening as verl does. `sums`: whitening_sums(advantages) of these responses.
struct Gae {
  std::vector<float> advantages, returns;  // per token
  WhiteningSums sums;
};
Gae gae(std::span<const std::int64_t> offsets, std::span<const float> token_rewards, std::span<const float> values,
        double gamma, double lambda);

// The critic's loss (verl's compute_value_loss with critic.cliprange_value, default 0.5, and loss_agg_mode).
struct ValueObjective {
  double clip = 0.5;
  Aggregation aggregation = Aggregation::kTokenMean;
};

// One mini-batch's (or a part's) response tokens for the value loss, laid out as rl::Tokens.
struct ValueTokens {
  std::span<const std::int64_t> offsets;
  std::span<const float> values;      // per token: the critic's values now (verl's vpreds)
  std::span<const float> old_values;  // the critic's values at the rollout (verl's values), the clip's centre
  std::span<const float> returns;     // GAE's returns (Gae::returns)
  // As rl::Tokens: the whole mini-batch's response tokens and responses over all ranks; 0: these are the
  // whole. The parts' losses and gradients then add up to the whole's.
  std::int64_t total_tokens = 0, total_responses = 0;
};

struct ValueLoss {
  double loss = 0;                  // 0.5 * agg(max(unclipped, clipped)), minimised
  double clip_fraction = 0;         // of these tokens, those where the clipped square was the larger
  std::int64_t clipped_tokens = 0;  // their count
  // Per token: d(loss)/d(v_t), the plain gradient, NOT negated (unlike Evaluated::weights, which are
  // -d(loss)/d(logp_t)): what the critic's backward takes as each value's output gradient.
  std::vector<float> gradient;
};
ValueLoss value_loss(const ValueObjective& objective, const ValueTokens& tokens);

}  // namespace zt::rl
