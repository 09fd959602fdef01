// PPO's token-level rewards, GAE with its batch whitening, and the critic's clipped value loss (ppo.hpp).
#include "rl/ppo.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "core/error.hpp"

namespace zt::rl {

namespace {

// The number of tokens the offsets cover, after checking that they start at 0, never decrease and
// cover every array of `sizes` exactly.
std::int64_t checked_tokens(std::span<const std::int64_t> offsets, std::initializer_list<std::size_t> sizes) {
  ZT_CHECK(!offsets.empty() && offsets.front() == 0, "rl: response offsets must start at 0");
  for (std::size_t i = 1; i < offsets.size(); ++i)
    ZT_CHECK(offsets[i] >= offsets[i - 1], "rl: response offsets decrease at ", i, " (", offsets[i - 1], " then ",
             offsets[i], ")");
  for (std::size_t s : sizes)
    ZT_CHECK(static_cast<std::int64_t>(s) == offsets.back(), "rl: a per-token array of ", s, " values for ",
             offsets.back(), " response tokens");
  return offsets.back();
}

}  // namespace

TokenRewards token_rewards(std::span<const std::int64_t> offsets, std::span<const float> scores,
                           std::span<const float> old_logp, std::span<const float> ref_logp, KlEstimator kl,
                           double kl_coef) {
  const bool penalised = kl_coef != 0;
  const std::int64_t T = penalised ? checked_tokens(offsets, {old_logp.size(), ref_logp.size()})
                                   : checked_tokens(offsets, {});
  ZT_CHECK(scores.size() + 1 == offsets.size(), "rl: ", scores.size(), " scores for ", offsets.size() - 1,
           " responses");
  TokenRewards out;
  out.rewards.assign(static_cast<std::size_t>(T), 0.0f);
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const std::int64_t b = offsets[i], e = offsets[i + 1];
    ZT_CHECK(e > b, "rl: response ", i, " has no tokens to carry its score");
    double kl_sum = 0;
    for (std::int64_t k = b; k < e; ++k) {
      const double kl_k = penalised ? kl_term(kl, old_logp[k], ref_logp[k]).value : 0.0;
      const double score = k == e - 1 ? scores[i] : 0.0;  // verl's token_level_scores
      out.rewards[static_cast<std::size_t>(k)] = static_cast<float>(score - kl_coef * kl_k);
      kl_sum += kl_k;
    }
    out.kl_mean_sum += kl_sum / static_cast<double>(e - b);
  }
  return out;
}

WhiteningSums& WhiteningSums::operator+=(const WhiteningSums& o) {
  count += o.count, sum += o.sum, sum_sq += o.sum_sq;
  return *this;
}

WhiteningSums whitening_sums(std::span<const float> x) {
  WhiteningSums s;
  for (float v : x) s.count += 1, s.sum += v, s.sum_sq += static_cast<double>(v) * v;
  return s;
}

void whiten(std::span<float> x, const WhiteningSums& whole) {
  ZT_CHECK(whole.count >= 2, "rl: whitening the advantages needs at least 2 response tokens in the batch, got ",
           whole.count, " (the unbiased variance divides by count - 1; verl refuses this too)");
  // verl's masked_mean divides by count + 1e-8, both for the mean and for the mean square about it.
  const double n = whole.count, mean = whole.sum / (n + 1e-8);
  const double centred_sq = std::max(0.0, whole.sum_sq - 2 * mean * whole.sum + n * mean * mean);
  const double var = centred_sq / (n + 1e-8) * (n / (n - 1));
  const double scale = 1.0 / std::sqrt(var + 1e-8);
  for (float& v : x) v = static_cast<float>((v - mean) * scale);
}

Gae gae(std::span<const std::int64_t> offsets, std::span<const float> token_rewards, std::span<const float> values,
        double gamma, double lambda) {
  const std::int64_t T = checked_tokens(offsets, {token_rewards.size(), values.size()});
  Gae g;
  g.advantages.assign(static_cast<std::size_t>(T), 0.0f);
  g.returns.assign(static_cast<std::size_t>(T), 0.0f);
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    double next_value = 0, next_advantage = 0;  // past a response's last token: no value, no advantage
    for (std::int64_t k = offsets[i + 1] - 1; k >= offsets[i]; --k) {
      const double delta = token_rewards[k] + gamma * next_value - values[k];
      next_advantage = delta + gamma * lambda * next_advantage;
      next_value = values[k];
      g.advantages[static_cast<std::size_t>(k)] = static_cast<float>(next_advantage);
      g.returns[static_cast<std::size_t>(k)] = static_cast<float>(next_advantage + values[k]);
    }
  }
  g.sums = whitening_sums(g.advantages);
  return g;
}

ValueLoss value_loss(const ValueObjective& o, const ValueTokens& t) {
  const std::int64_t T = checked_tokens(t.offsets, {t.values.size(), t.old_values.size(), t.returns.size()});
  ZT_CHECK(t.offsets.size() >= 2 && T > 0, "rl: a value loss over no response tokens");
  ZT_CHECK(o.clip >= 0, "rl: the value clip range ", o.clip, " is negative");
  const auto n = static_cast<std::int64_t>(t.offsets.size()) - 1;
  const std::int64_t T_all = t.total_tokens > 0 ? t.total_tokens : T;
  const std::int64_t n_all = t.total_responses > 0 ? t.total_responses : n;
  ValueLoss out;
  out.gradient.assign(static_cast<std::size_t>(T), 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t b = t.offsets[i], e = t.offsets[i + 1];
    const double c = aggregation_coefficient(o.aggregation, e - b, n_all, T_all);
    for (std::int64_t k = b; k < e; ++k) {
      const double v = t.values[k], R = t.returns[k], old = t.old_values[k];
      const double v_clipped = std::clamp(v, old - o.clip, old + o.clip);
      const double unclipped = (v - R) * (v - R), clipped = (v_clipped - R) * (v_clipped - R);
      // The larger square is the loss; only the unclipped one depends on v (inside the range both are
      // the same square, and torch's max passes the gradient whole then too).
      const bool took_clipped = clipped > unclipped;
      out.loss += 0.5 * c * std::max(unclipped, clipped);
      out.gradient[static_cast<std::size_t>(k)] = took_clipped ? 0.0f : static_cast<float>(c * (v - R));
      out.clipped_tokens += took_clipped ? 1 : 0;
    }
  }
  out.clip_fraction = static_cast<double>(out.clipped_tokens) / static_cast<double>(T);
  return out;
}

}  // namespace zt::rl
