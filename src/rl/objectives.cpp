// RL's policy objectives and their per-token weights (objectives.hpp).
#include "rl/objectives.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace zt::rl {

std::vector<float> group_advantages(std::span<const float> rewards, int group, bool norm_by_std) {
  ZT_CHECK(group > 0 && rewards.size() % static_cast<std::size_t>(group) == 0, "rl: ", rewards.size(),
           " rewards are not groups of ", group);
  std::vector<float> a(rewards.size());
  for (std::size_t g0 = 0; g0 < rewards.size(); g0 += static_cast<std::size_t>(group)) {
    double mean = 0, var = 0;
    for (int k = 0; k < group; ++k) mean += rewards[g0 + k];
    mean /= group;
    for (int k = 0; k < group; ++k) var += (rewards[g0 + k] - mean) * (rewards[g0 + k] - mean);
    double std = group > 1 ? std::sqrt(var / (group - 1)) : 1.0;  // torch.std, unbiased
    if (group == 1) mean = 0;  // verl: a group of one keeps its reward (mean 0, std 1)
    for (int k = 0; k < group; ++k) {
      const double centred = rewards[g0 + k] - mean;
      a[g0 + k] = static_cast<float>(norm_by_std ? centred / (std + 1e-6) : centred);
    }
  }
  return a;
}

KlTerm kl_term(KlEstimator kl, double logp, double ref_logp) {
  const double d = ref_logp - logp;  // log(ref / pi)
  if (kl == KlEstimator::kK1) return {-d, 1.0};
  // k3, verl's low_var_kl: log(ref / pi) clamped to [-20, 20], the estimate to [-10, 10]
  const double dc = std::clamp(d, -20.0, 20.0);
  KlTerm t{std::exp(dc) - dc - 1, std::abs(d) <= 20.0 ? 1 - std::exp(dc) : 0.0};
  if (t.value > 10 || t.value < -10) t = {std::clamp(t.value, -10.0, 10.0), 0.0};
  return t;
}

double aggregation_coefficient(Aggregation agg, std::int64_t tokens, std::int64_t total_responses,
                               std::int64_t total_tokens) {
  switch (agg) {
    case Aggregation::kTokenMean: return 1.0 / static_cast<double>(total_tokens);
    case Aggregation::kSeqMeanTokenMean:
      return 1.0 / (static_cast<double>(total_responses) * static_cast<double>(tokens));
    case Aggregation::kSeqMeanTokenSum: return 1.0 / static_cast<double>(total_responses);
  }
  return 0;
}

namespace {

// PPO's clipped term for advantage A and ratio r (verl's compute_policy_loss, with its dual clip of 3 for
// A < 0): the loss, whether the clipped branch was taken, and d(loss)/d(r).
struct Clipped {
  double loss, dloss_dratio;
  bool clipped;
};
// dual_clip: verl's vanilla (PPO, GRPO) loss bounds a negative advantage's loss by 3|A|; its GSPO loss,
// as the GSPO paper's, does not.
Clipped clipped_term(double A, double r, double low, double high, bool dual_clip) {
  const double l1 = -A * r, l2 = -A * std::clamp(r, 1 - low, 1 + high);
  Clipped c{std::max(l1, l2), l1 >= l2 ? -A : 0.0, l2 > l1};
  if (dual_clip && A < 0 && -A * 3.0 < c.loss) c = {-A * 3.0, 0.0, c.clipped};
  return c;
}

}  // namespace

Evaluated evaluate(const Objective& o, const Tokens& t) {
  ZT_CHECK(t.offsets.size() >= 2, "rl: no responses");
  const std::size_t n = t.offsets.size() - 1;
  const auto T = t.offsets.back();
  const bool per_token = !t.token_advantages.empty();
  ZT_CHECK(per_token ? static_cast<std::int64_t>(t.token_advantages.size()) == T && t.advantages.empty()
                     : t.advantages.size() == n,
           "rl: ", per_token ? t.token_advantages.size() : t.advantages.size(), " advantages for ", n,
           " responses of ", T, " tokens (give one per response or one per token, not both)");
  const std::int64_t T_all = t.total_tokens > 0 ? t.total_tokens : T;
  const std::int64_t n_all = t.total_responses > 0 ? t.total_responses : static_cast<std::int64_t>(n);
  ZT_CHECK(static_cast<std::int64_t>(t.logp.size()) == T && t.old_logp.size() == t.logp.size() &&
               (o.kl_coef == 0 || t.ref_logp.size() == t.logp.size()) &&
               (t.entropy.empty() || t.entropy.size() == t.logp.size()),
           "rl: per-token arrays of different lengths");
  ZT_CHECK(o.entropy_coeff == 0 || !t.entropy.empty(), "rl: an entropy bonus needs the tokens' entropies");
  Evaluated e;
  e.weights.assign(static_cast<std::size_t>(T), 0.0f);
  if (o.entropy_coeff != 0) e.entropy_weights.assign(static_cast<std::size_t>(T), 0.0f);
  double clipped_tokens = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t b = t.offsets[i], Ti = t.offsets[i + 1] - b;
    ZT_CHECK(Ti > 0, "rl: response ", i, " has no tokens");
    const double c = aggregation_coefficient(o.aggregation, Ti, n_all, T_all);
    double seq_log_ratio = 0;
    for (std::int64_t k = b; k < b + Ti; ++k) seq_log_ratio += t.logp[k] - t.old_logp[k];
    seq_log_ratio /= static_cast<double>(Ti);
    for (std::int64_t k = b; k < b + Ti; ++k) {
      // GSPO: every token carries the sequence ratio (verl clamps its log at 10), whose derivative in the
      // token's log p is the ratio itself; GRPO/PPO: the token's own ratio.
      // verl clamps the log-ratio: GSPO's sequence one at 10, a token's to [-20, 20] (no gradient beyond).
      const double token_log_ratio = static_cast<double>(t.logp[k]) - t.old_logp[k];
      const double log_r = o.algorithm == Algorithm::kGspo ? std::min(seq_log_ratio, 10.0)
                                                           : std::clamp(token_log_ratio, -20.0, 20.0);
      const bool flows = o.algorithm == Algorithm::kGspo ? seq_log_ratio <= 10.0 : std::abs(token_log_ratio) <= 20.0;
      const double r = std::exp(log_r);
      const double A = per_token ? t.token_advantages[k] : t.advantages[i];
      const Clipped p = clipped_term(A, r, o.clip_low, o.clip_high, o.algorithm != Algorithm::kGspo);
      e.policy_loss += c * p.loss;
      double dlogp = flows ? c * p.dloss_dratio * r : 0.0;
      clipped_tokens += p.clipped ? 1 : 0;
      if (o.kl_coef != 0) {
        const KlTerm kl = kl_term(o.kl, t.logp[k], t.ref_logp[k]);
        e.kl += c * kl.value;
        dlogp += o.kl_coef * c * kl.dvalue_dlogp;
      }
      e.weights[static_cast<std::size_t>(k)] = static_cast<float>(-dlogp);
      if (t.entropy.empty()) continue;
      e.entropy += c * t.entropy[k];
      if (o.entropy_coeff != 0) e.entropy_weights[static_cast<std::size_t>(k)] = static_cast<float>(-o.entropy_coeff * c);
    }
  }
  e.loss = e.policy_loss + o.kl_coef * e.kl - o.entropy_coeff * e.entropy;
  e.clipped_tokens = static_cast<std::int64_t>(clipped_tokens);
  e.clip_fraction = clipped_tokens / static_cast<double>(T);
  return e;
}

}  // namespace zt::rl
