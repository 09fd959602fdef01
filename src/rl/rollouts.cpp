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

gen::EngineOptions engine_options(const config::Config& c, std::int64_t max_len, std::int64_t dp, std::int64_t prompt_len) {
  gen::EngineOptions e{.slots = gen::dealt_slots(c.rl.slots, c.rl.batch, c.rl.group_size, dp), .max_len = max_len,
                       .prefill_chunk = gen::whole_prompt_chunk(max_len, prompt_len),
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

void use_layout(model::Model& model, const MicroBatch& mb) {
  model.set_segment_starts(mb.segment_starts.empty() ? nullptr : mb.segment_starts.data());
  model.set_positions(mb.positions_in_sequence.empty() ? nullptr : mb.positions_in_sequence.data());
}

std::int64_t rollout_sequence(const Rollout& r, std::int64_t group) { return r.position * group + r.sample; }

std::int64_t rollout_tokens(const Rollout& r) { return static_cast<std::int64_t>(r.prompt.size() + r.response.size()); }

MicroBatch pack(std::span<const Rollout> rollouts, std::span<const Placement> placements, int rows, std::int64_t seq_len,
                std::int64_t group, std::int64_t first_sequence) {
  MicroBatch m;
  const auto cells = static_cast<std::size_t>(rows * seq_len);
  m.tokens.assign(cells, 0);
  m.targets.assign(cells, backend::kIgnoreTarget);
  m.offsets.push_back(0);
  const bool packed = std::any_of(placements.begin(), placements.end(), [](const Placement& p) { return p.column > 0; });
  if (packed) {  // every cell its row's start and its column (padding and unpacked rows: the defaults)
    m.segment_starts.assign(cells, 0);
    m.positions_in_sequence.resize(cells);
    for (std::size_t c = 0; c < cells; ++c) m.positions_in_sequence[c] = static_cast<std::int32_t>(c % static_cast<std::size_t>(seq_len));
  }
  for (std::size_t i = 0; i < placements.size(); ++i) {
    const Placement& p = placements[i];
    const Rollout& r = rollouts[p.rollout];
    const auto P = static_cast<std::int64_t>(r.prompt.size()), R = static_cast<std::int64_t>(r.response.size());
    ZT_CHECK(p.row >= 0 && p.row < rows && p.column >= 0, "rl: a rollout placed at row ", p.row, " column ", p.column,
             " of ", rows, " rows");
    ZT_CHECK(P >= 1 && R >= 1 && p.column + P + R <= seq_len, "rl: a rollout of ", P, " + ", R, " tokens at column ",
             p.column, " in rows of ", seq_len);
    const std::int64_t base = static_cast<std::int64_t>(p.row) * seq_len + p.column;
    std::copy(r.prompt.begin(), r.prompt.end(), m.tokens.begin() + base);
    std::copy(r.response.begin(), r.response.end(), m.tokens.begin() + base + P);
    for (std::int64_t k = 0; k < R; ++k) {  // response token k is predicted at position P - 1 + k
      const std::int64_t at = base + P - 1 + k;
      m.targets[static_cast<std::size_t>(at)] = r.response[static_cast<std::size_t>(k)];
      m.positions.push_back(at);
    }
    if (packed)
      for (std::int64_t t = 0; t < P + R; ++t) {
        m.segment_starts[static_cast<std::size_t>(base + t)] = static_cast<std::int32_t>(p.column);
        m.positions_in_sequence[static_cast<std::size_t>(base + t)] = static_cast<std::int32_t>(t);
      }
    m.offsets.push_back(m.offsets.back() + R);
    m.which.push_back(p.rollout);
    // Dropout: its cells up to the next rollout of the row (or the row's end), keyed as if alone in a row.
    const bool row_goes_on = i + 1 < placements.size() && placements[i + 1].row == p.row;
    const std::int64_t end = row_goes_on ? placements[i + 1].column : seq_len;
    ZT_CHECK(end >= p.column + P + R, "rl: rollouts overlap in row ", p.row, " at column ", end);
    const std::int64_t key = (first_sequence + rollout_sequence(r, group)) * seq_len;
    m.dropout_rows.push_back({.first = base, .count = end - p.column, .key = static_cast<std::uint64_t>(key)});
  }
  return m;
}

MicroBatch pack(std::span<const Rollout> rollouts, std::span<const std::size_t> which, int rows, std::int64_t seq_len) {
  ZT_CHECK(static_cast<int>(which.size()) <= rows, "rl: ", which.size(), " rollouts for ", rows, " rows");
  std::vector<Placement> placements;
  for (std::size_t row = 0; row < which.size(); ++row) placements.push_back({which[row], static_cast<int>(row), 0});
  return pack(rollouts, placements, rows, seq_len);
}

void UpdatePlan::pad_to(std::span<const std::int64_t> counts) {
  ZT_CHECK_EQ(counts.size(), steps.size(), "rl: pass counts per optimizer step");
  for (std::size_t s = 0; s < steps.size(); ++s) {
    ZT_CHECK_LE(static_cast<std::int64_t>(steps[s].size()), counts[s], "rl: fewer passes than this rank's own");
    steps[s].resize(static_cast<std::size_t>(counts[s]));
  }
}

std::int64_t UpdatePlan::rows_used() const {
  std::int64_t n = 0;
  for (const auto& step : steps)
    for (const auto& pass : step) {
      std::vector<int> rows;
      for (const Placement& p : pass) rows.push_back(p.row);
      std::sort(rows.begin(), rows.end());
      n += std::unique(rows.begin(), rows.end()) - rows.begin();
    }
  return n;
}

std::vector<std::size_t> step_sizes(std::span<const Rollout> rollouts, std::int64_t steps, std::int64_t mini_batch) {
  std::vector<std::size_t> sizes(static_cast<std::size_t>(steps), 0);
  std::int64_t last = 0;
  for (const Rollout& r : rollouts) {
    const std::int64_t s = r.position / mini_batch;
    ZT_CHECK(s >= last && s < steps, "rl: rollout at position ", r.position, " out of step order (step ", s, " of ", steps, ")");
    ++sizes[static_cast<std::size_t>(last = s)];
  }
  return sizes;
}

UpdatePlan plan_update(std::span<const Rollout> rollouts, std::span<const std::size_t> step_sizes, std::int64_t micro_batch,
                       std::int64_t seq_len, bool pack) {
  ZT_CHECK(micro_batch > 0 && std::accumulate(step_sizes.begin(), step_sizes.end(), std::size_t{0}) == rollouts.size(),
           "rl: ", rollouts.size(), " rollouts in steps of ", step_sizes.size());
  UpdatePlan plan;
  std::size_t first = 0;
  for (const std::size_t per_step : step_sizes) {
    std::vector<Placement> placed;  // rows numbered over the step
    if (!pack) {
      for (std::size_t k = 0; k < per_step; ++k) placed.push_back({first + k, static_cast<int>(k), 0});
    } else {
      std::vector<std::size_t> order(per_step);
      std::iota(order.begin(), order.end(), first);
      const auto length = [&](std::size_t i) { return rollout_tokens(rollouts[i]); };
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return length(a) > length(b); });
      std::vector<std::int64_t> used;  // per row: its columns taken
      for (const std::size_t i : order) {
        std::size_t row = 0;
        while (row < used.size() && used[row] + length(i) > seq_len) ++row;
        if (row == used.size()) used.push_back(0);
        placed.push_back({i, static_cast<int>(row), used[row]});
        used[row] += length(i);
      }
      // Each row's rollouts in column order (the micro-batch's offsets follow the placements).
      std::stable_sort(placed.begin(), placed.end(), [](const Placement& a, const Placement& b) {
        return a.row != b.row ? a.row < b.row : a.column < b.column;
      });
    }
    std::vector<std::vector<Placement>> passes;
    for (Placement p : placed) {
      const auto pass = static_cast<std::size_t>(p.row / micro_batch);
      if (passes.size() <= pass) passes.resize(pass + 1);
      p.row = static_cast<int>(p.row % micro_batch);
      passes[pass].push_back(p);
    }
    plan.steps.push_back(std::move(passes));
    first += per_step;
  }
  return plan;
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
  if (which.empty()) {  // an empty pass (a rank with fewer packed passes than its group's): nothing to weigh
    MicroObjective none;
    none.loss_weights.assign(mb.tokens.size(), 0.0f);
    if (objective.entropy_coeff != 0) none.entropy_weights.assign(mb.tokens.size(), 0.0f);
    return none;
  }
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
