// An RL iteration's prompts, rollouts and micro-batches (rollouts.hpp).
#include "rl/rollouts.hpp"

#include <algorithm>
#include <numeric>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "model/from_config.hpp"
#include "rl/objectives.hpp"

namespace zt::rl {
namespace {

// Epoch `epoch`'s order of n prompts: Fisher-Yates driven by the counter RNG (seed, epoch, step).
std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch) {
  static const std::uint64_t kPurpose = rng::purpose_id("rl/prompt_order");
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  for (std::size_t i = n; i > 1; --i) {
    const double u = rng::uniform(seed ^ (epoch * 0x9E3779B97F4A7C15ull), kPurpose, i);
    std::swap(order[i - 1], order[std::min(i - 1, static_cast<std::size_t>(u * static_cast<double>(i)))]);
  }
  return order;
}

}  // namespace

gen::EngineOptions engine_options(const config::Config& c, std::int64_t max_len) {
  gen::EngineOptions e{.slots = static_cast<int>(c.rl.slots), .max_len = max_len, .prefill_chunk = max_len,
                       .compute = model::compute_dtype(c.train.precision)};
  e.sampling = {static_cast<float>(c.rl.temperature), static_cast<int>(c.rl.top_k), static_cast<float>(c.rl.top_p),
                c.train.seed};
  return e;
}

std::vector<std::size_t> iteration_prompts(std::size_t n_prompts, std::uint64_t seed, std::int64_t iteration,
                                           std::int64_t batch) {
  ZT_CHECK(n_prompts > 0 && batch > 0 && iteration >= 0, "rl: iteration_prompts(", n_prompts, ", ", batch, ")");
  std::vector<std::size_t> out;
  std::vector<std::size_t> order;
  std::uint64_t order_epoch = ~std::uint64_t{0};
  for (std::int64_t j = 0; j < batch; ++j) {
    const auto position = static_cast<std::uint64_t>(iteration * batch + j);
    const std::uint64_t epoch = position / n_prompts;
    if (epoch != order_epoch) order = epoch_order(n_prompts, seed, epoch), order_epoch = epoch;
    out.push_back(order[position % n_prompts]);
  }
  return out;
}

std::uint64_t response_stream(std::int64_t iteration, std::int64_t batch, std::int64_t position, std::int64_t group,
                              std::int64_t sample) {
  return static_cast<std::uint64_t>((iteration * batch + position) * group + sample);
}

std::vector<std::int64_t> rank_positions(std::int64_t batch, std::int64_t mini_batch, int dp, int dp_rank) {
  ZT_CHECK(mini_batch > 0 && batch % mini_batch == 0 && mini_batch % dp == 0, "rl: batch ", batch, ", mini-batch ",
           mini_batch, " over ", dp, " ranks");
  const std::int64_t share = mini_batch / dp;
  std::vector<std::int64_t> out;
  for (std::int64_t first = 0; first < batch; first += mini_batch)
    for (std::int64_t k = 0; k < share; ++k) out.push_back(first + dp_rank * share + k);
  return out;
}

MicroBatch pack(std::span<const Rollout> rollouts, std::span<const std::size_t> which, int rows, std::int64_t seq_len) {
  ZT_CHECK(static_cast<int>(which.size()) <= rows, "rl: ", which.size(), " rollouts for ", rows, " rows");
  MicroBatch m;
  const auto cells = static_cast<std::size_t>(rows * seq_len);
  m.tokens.assign(cells, 0);
  m.targets.assign(cells, backend::kIgnoreTarget);
  m.offsets.push_back(0);
  for (std::size_t row = 0; row < which.size(); ++row) {
    const Rollout& r = rollouts[which[row]];
    const auto P = static_cast<std::int64_t>(r.prompt.size()), R = static_cast<std::int64_t>(r.response.size());
    ZT_CHECK(P >= 1 && R >= 1 && P + R <= seq_len, "rl: a rollout of ", P, " + ", R, " tokens in rows of ", seq_len);
    const std::int64_t base = static_cast<std::int64_t>(row) * seq_len;
    std::copy(r.prompt.begin(), r.prompt.end(), m.tokens.begin() + base);
    std::copy(r.response.begin(), r.response.end(), m.tokens.begin() + base + P);
    for (std::int64_t k = 0; k < R; ++k) {  // response token k is predicted at position P - 1 + k
      const std::int64_t at = base + P - 1 + k;
      m.targets[static_cast<std::size_t>(at)] = r.response[static_cast<std::size_t>(k)];
      m.positions.push_back(at);
    }
    m.offsets.push_back(m.offsets.back() + R);
  }
  return m;
}

std::vector<float> MicroBatch::at_responses(std::span<const float> per_position) const {
  std::vector<float> out;
  out.reserve(positions.size());
  for (const std::int64_t at : positions) out.push_back(per_position[static_cast<std::size_t>(at)]);
  return out;
}

std::vector<float> MicroBatch::to_positions(std::span<const float> per_token) const {
  ZT_CHECK_EQ(per_token.size(), positions.size(), "rl: per-token values for the micro-batch's response tokens");
  std::vector<float> out(tokens.size(), 0.0f);
  for (std::size_t k = 0; k < per_token.size(); ++k) out[static_cast<std::size_t>(positions[k])] = per_token[k];
  return out;
}

MicroObjective micro_objective(const Objective& objective, const MicroBatch& mb, std::span<const Rollout> rollouts,
                               std::span<const std::size_t> which, std::span<const float> token_losses,
                               const std::vector<std::vector<float>>& old_logp,
                               const std::vector<std::vector<float>>& ref_logp, std::int64_t total_tokens,
                               std::int64_t total_responses, std::span<const float> token_entropies) {
  std::vector<float> logp = mb.at_responses(token_losses), old, ref, advantages, token_advantages;
  const std::vector<float> entropy = token_entropies.empty() ? std::vector<float>() : mb.at_responses(token_entropies);
  for (float& x : logp) x = -x;
  for (std::size_t i = 0; i < which.size(); ++i) {
    advantages.push_back(rollouts[which[i]].advantage);
    const std::vector<float>& per_token = rollouts[which[i]].token_advantages;
    token_advantages.insert(token_advantages.end(), per_token.begin(), per_token.end());
    for (std::int64_t k = mb.offsets[i]; k < mb.offsets[i + 1]; ++k) {
      const auto j = static_cast<std::size_t>(k - mb.offsets[i]);
      old.push_back(old_logp.empty() ? logp[static_cast<std::size_t>(k)] : old_logp[which[i]][j]);
      if (!ref_logp.empty()) ref.push_back(ref_logp[which[i]][j]);
    }
  }
  MicroObjective out;
  const bool per_token = !token_advantages.empty();  // PPO: every rollout has them
  ZT_CHECK(!per_token || token_advantages.size() == logp.size(), "rl: per-token advantages of ", token_advantages.size(),
           " tokens for ", logp.size());
  out.evaluated = evaluate(objective, {mb.offsets, logp, old, ref, per_token ? std::span<const float>() : advantages,
                                       total_tokens, total_responses, token_advantages, entropy});
  out.loss_weights = mb.to_positions(out.evaluated.weights);
  if (!out.evaluated.entropy_weights.empty()) out.entropy_weights = mb.to_positions(out.evaluated.entropy_weights);
  return out;
}

void assign_group_advantages(std::span<Rollout> rollouts, int group, bool norm_by_std) {
  std::vector<float> rewards;
  for (const Rollout& r : rollouts) rewards.push_back(static_cast<float>(r.reward));
  const std::vector<float> a = group_advantages(rewards, group, norm_by_std);
  for (std::size_t i = 0; i < rollouts.size(); ++i) rollouts[i].advantage = a[i];
}

}  // namespace zt::rl
