// The policy objectives of RL post-training (issue 33), as host arithmetic over one mini-batch's response
// tokens: advantages from rewards, and for each objective its value and, per token, the weight w_t with
// which the token's cross-entropy enters the backward pass (Model::set_loss_weights): the model's loss
// gradient then IS the objective's, because d(objective)/d(log p_t) = -w_t and the token's cross-entropy
// is -log p_t. Names and semantics follow verl (trainer/ppo/core_algos.py) where it has them:
//   GRPO advantages   (r_i - mean of the group) / (std of the group + 1e-6), the unbiased std (torch.std;
//                     a group of one keeps its reward: mean 0, std 1); with norm_by_std = false Dr. GRPO's
//                     r_i - mean;
//   PPO's clipped policy loss  max(-A r_t, -A clip(r_t, 1 - eps_low, 1 + eps_high)), r_t = exp(logp - old),
//                     A one advantage per response (GRPO) or per token (PPO's GAE, rl/ppo.hpp);
//   GSPO (Zheng et al. 2025)   the same clip on the sequence ratio s_i = exp(mean_t(logp - old)), each
//                     token of a response carrying its sequence's loss;
//   KL to the reference in the loss, k1 (logp - ref) or k3 (exp(ref - logp) - (ref - logp) - 1), times kl_coef;
//   aggregation token-mean (over every response token of the mini-batch), seq-mean-token-mean (the mean
//   over responses of their token means) or seq-mean-token-sum;
//   the entropy bonus  -entropy_coeff * the aggregated entropy of the policy's next-token distribution at
//                     each response token (verl's entropy_coeff, default 0). Its gradient is not a
//                     cross-entropy weight: each token's d(loss)/dH_t goes to Model::set_entropy_weights.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace zt::rl {

// The configuration's names (rl.algorithm, rl.kl_estimator, rl.loss_agg). PPO's name joins with the
// critic's value head; its host arithmetic (GAE, the value loss) is rl/ppo.hpp, its policy loss is
// evaluate() below with per-token advantages.
using Algorithm = config::RlAlgorithm;
using KlEstimator = config::KlEstimator;
using Aggregation = config::LossAggregation;

// GRPO's advantages: rewards of n groups of `group` consecutive responses each.
std::vector<float> group_advantages(std::span<const float> rewards, int group, bool norm_by_std = true);

// A per-token KL estimate of the policy to the reference and its derivative in log p (verl's kl_penalty:
// k1 "kl" logp - ref; k3 "low_var_kl" exp(ref - logp) - (ref - logp) - 1 with log(ref / pi) clamped to
// [-20, 20] and the estimate to [-10, 10], no gradient past either clamp). Shared by the loss's KL term
// here and the reward's KL penalty (rl/ppo.hpp).
struct KlTerm {
  double value = 0, dvalue_dlogp = 0;
};
KlTerm kl_term(KlEstimator kl, double logp, double ref_logp);

// The aggregation's coefficient of each token of a response of `tokens` tokens, in a whole mini-batch of
// `total_responses` responses and `total_tokens` tokens: the aggregated loss is the sum over tokens of
// coefficient * the token's loss (verl's agg_loss). Shared by the policy and the value loss (rl/ppo.hpp).
double aggregation_coefficient(Aggregation agg, std::int64_t tokens, std::int64_t total_responses,
                               std::int64_t total_tokens);

struct Objective {
  Algorithm algorithm = Algorithm::kGrpo;
  double clip_low = 0.2, clip_high = 0.2;  // verl's clip_ratio_low / clip_ratio_high
  double kl_coef = 0;                       // 0: no reference term
  KlEstimator kl = KlEstimator::kK3;
  Aggregation aggregation = Aggregation::kTokenMean;
  double entropy_coeff = 0;                 // verl's entropy_coeff; 0: no entropy term
};

// One mini-batch's responses: token t of response i is element offsets[i] + t of the per-token arrays
// (offsets has one more entry than responses: the end).
struct Tokens {
  std::span<const std::int64_t> offsets;
  std::span<const float> logp;      // the current policy's log-probabilities (-Model::token_losses())
  std::span<const float> old_logp;  // the rollout policy's (at generation; equal to logp on the first epoch)
  std::span<const float> ref_logp;  // the reference model's (read when kl_coef != 0)
  std::span<const float> advantages;  // per response (GRPO, GSPO); empty when token_advantages is given
  // A part of a mini-batch (a micro-batch on one rank): the whole mini-batch's response tokens and
  // responses over all ranks, which the aggregation divides by; 0: these tokens are the whole. The
  // parts' losses and weights then add up to the whole's.
  std::int64_t total_tokens = 0, total_responses = 0;
  // Per token (PPO: GAE's whitened advantages, rl/ppo.hpp), in place of `advantages` when non-empty. Last,
  // so that the positional initialisers of the per-response case stay as they were.
  std::span<const float> token_advantages;
  // Per token: the entropy of the current policy's distribution there (-sum_v p_v log p_v,
  // Model::token_entropies()); empty: not computed (then entropy_coeff must be 0).
  std::span<const float> entropy;
};

struct Evaluated {
  double loss = 0;              // the objective's value (minimised)
  double policy_loss = 0, kl = 0;  // its parts, aggregated alike (kl before kl_coef)
  double entropy = 0;              // the aggregated entropy (before entropy_coeff); 0 without entropies
  double clip_fraction = 0;     // tokens (GSPO: sequences' tokens) where the clipped term was taken, of these
  std::int64_t clipped_tokens = 0;  // their count
  std::vector<float> weights;   // per token: -d(loss)/d(logp_t), for Model::set_loss_weights
  std::vector<float> entropy_weights;  // per token: d(loss)/d(H_t), for Model::set_entropy_weights; empty
                                       // when entropy_coeff is 0
};

Evaluated evaluate(const Objective& objective, const Tokens& tokens);

}  // namespace zt::rl
