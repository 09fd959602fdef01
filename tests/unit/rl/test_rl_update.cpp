// An RL update's gradient as the trainer computes it (rl::pack, the model's forward, rl::micro_objective,
// Model::set_loss_weights, backward) against central finite differences of the objective itself (the
// same pack and forward, the log-probabilities fed to rl::evaluate), in double: rollouts of different
// prompt and response lengths in one micro-batch, off-policy old log-probabilities (some clipped), a
// KL term to a reference, for GRPO and GSPO and every aggregation, on GPT-2 and Llama.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "backend/backend.hpp"
#include "model/decoder.hpp"
#include "rl/rollouts.hpp"
#include "tests/unit/model/far_from_init.hpp"

namespace zt::rl {
namespace {

constexpr std::int64_t kSeq = 12;
constexpr int kRows = 4;

std::vector<Rollout> fixed_rollouts() {
  std::vector<Rollout> r(kRows);
  const int prompt_len[kRows] = {3, 1, 5, 2}, response_len[kRows] = {4, 6, 2, 9};
  for (int i = 0; i < kRows; ++i) {
    for (int t = 0; t < prompt_len[i]; ++t) r[i].prompt.push_back((7 * i + 3 * t + 1) % 61);
    for (int t = 0; t < response_len[i]; ++t) r[i].response.push_back((11 * i + 5 * t + 2) % 61);
    r[i].advantage = i % 2 ? -0.8f : 1.3f;
  }
  return r;
}

struct UpdateCase {
  model::GptShape shape;
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(2);
  model::ParamTable table;
  std::unique_ptr<model::Decoder> model;
  std::vector<Rollout> rollouts = fixed_rollouts();
  std::vector<std::size_t> rows = {0, 1, 2, 3};
  MicroBatch mb = pack(rollouts, rows, kRows, kSeq);
  explicit UpdateCase(const model::GptShape& s) : shape(s), table(s) {
    model = std::make_unique<model::Decoder>(*be, table, model::ModelOptions{.micro_batch = kRows});
  }
  // The model's token losses with these parameters.
  std::vector<float> losses(const std::vector<float>& host) {
    const auto n = static_cast<std::int64_t>(host.size());
    backend::Buffer pb = be->allocate(host.size() * sizeof(float));
    be->copy_from_host(pb.data(), host.data(), pb.bytes());
    model::FlatParams params(table, pb.view(DType::kF32, {n}));
    model->forward(mb.tokens.data(), mb.targets.data(), params);
    return model->token_losses();
  }
};

// Per-rollout values `losses`' log-probabilities minus d: 0.1 x (-1, 0, 1) along the tokens plus a
// rollout's own offset, so the log-ratios sit at least 0.1 from the clip's kinks (log 0.8, log 1.28; the
// dual clip's at log 3), on either side of them: the finite differences never straddle one.
std::vector<std::vector<float>> shifted(const UpdateCase& s, const std::vector<float>& losses,
                                        const std::array<float, kRows>& per_rollout) {
  std::vector<std::vector<float>> out(kRows);
  for (int i = 0; i < kRows; ++i)
    for (std::int64_t k = s.mb.offsets[i]; k < s.mb.offsets[i + 1]; ++k)
      out[i].push_back(-losses[static_cast<std::size_t>(s.mb.positions[static_cast<std::size_t>(k)])] -
                       (0.1f * static_cast<float>((k % 3) - 1) + per_rollout[static_cast<std::size_t>(i)]));
  return out;
}

class RlUpdate : public ::testing::TestWithParam<std::tuple<bool, Algorithm, Aggregation>> {};

TEST_P(RlUpdate, GradientIsTheObjectivesFiniteDifference) {
  const auto [llama, algorithm, aggregation] = GetParam();
  UpdateCase s(llama ? model::GptShape::make_llama(2, 4, 16, 61, kSeq, 2, 24, false, 1e-5, model::RopeParams{10000, false, 1, 1, 4, 8192})
                : model::GptShape::make(2, 2, 16, 61, kSeq));
  std::vector<float> host = model::testing::far_from_init(s.table, 5);
  const std::vector<float> base_losses = s.losses(host);
  // Fixed old and reference log-probabilities (the current ones, shifted: some ratios past the clip).
  const std::vector<std::vector<float>> old = shifted(s, base_losses, {0.5f, 0.0f, -0.5f, 0.05f}),
                                          ref = shifted(s, base_losses, {-0.2f, 0.3f, 0.1f, 0.0f});
  const Objective objective{.algorithm = algorithm, .clip_low = 0.2, .clip_high = 0.28, .kl_coef = 0.05,
                            .aggregation = aggregation};
  const std::int64_t total_tokens = s.mb.offsets.back() + 7, total_responses = kRows + 2;  // part of a larger mini-batch
  auto objective_at = [&](const std::vector<float>& p) {
    return micro_objective(objective, s.mb, s.rollouts, s.rows, s.losses(p), old, ref, total_tokens, total_responses);
  };

  // The trainer's gradient.
  const MicroObjective at = objective_at(host);
  const auto n = static_cast<std::int64_t>(host.size());
  backend::Buffer pb = s.be->allocate(host.size() * sizeof(float)), gb = s.be->allocate(host.size() * sizeof(float));
  s.be->copy_from_host(pb.data(), host.data(), pb.bytes());
  s.be->fill_zero(gb.view(DType::kF32, {n}));
  model::FlatParams params(s.table, pb.view(DType::kF32, {n}));
  model::FlatGrads grads(s.table, gb.view(DType::kF32, {n}));
  s.model->forward(s.mb.tokens.data(), s.mb.targets.data(), params);
  s.model->set_loss_weights(at.loss_weights.data());
  s.model->backward(params, grads, 1.0f);
  s.model->set_loss_weights(nullptr);
  std::vector<float> g(host.size());
  s.be->copy_to_host(g.data(), gb.data(), gb.bytes());
  EXPECT_GT(at.evaluated.clipped_tokens, 0) << "the case should take the clipped branch somewhere";

  // Central differences on a spread of parameters (every unit, weights and norms).
  const float h = 2e-3f;
  int checked = 0;
  for (std::size_t i = 3; i < host.size(); i += host.size() / 97 + 1) {
    std::vector<float> plus = host, minus = host;
    plus[i] += h, minus[i] -= h;
    const double fd = (objective_at(plus).evaluated.loss - objective_at(minus).evaluated.loss) / (2.0 * h);
    EXPECT_NEAR(g[i], fd, 2e-3 * std::max(1.0, std::abs(fd)) + 1e-5) << "parameter " << i;
    checked += std::abs(fd) > 1e-6 ? 1 : 0;
  }
  EXPECT_GT(checked, 20) << "too few parameters with a gradient to compare";
}

INSTANTIATE_TEST_SUITE_P(
    FamiliesObjectivesAggregations, RlUpdate,
    ::testing::Combine(::testing::Bool(), ::testing::Values(Algorithm::kGrpo, Algorithm::kGspo),
                       ::testing::Values(Aggregation::kTokenMean, Aggregation::kSeqMeanTokenMean, Aggregation::kSeqMeanTokenSum)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) ? "llama_" : "gpt2_") +
             (std::get<1>(info.param) == Algorithm::kGrpo ? "grpo_" : "gspo_") +
             std::to_string(static_cast<int>(std::get<2>(info.param)));
    });

// pack: one rollout per row, padded; a response token is the target of the position before it.
TEST(RlPack, LaysRolloutsOutAsRowsWithResponseTargets) {
  const std::vector<Rollout> r = fixed_rollouts();
  const std::vector<std::size_t> which = {2, 0};
  const MicroBatch mb = pack(r, which, 3, kSeq);
  ASSERT_EQ(mb.tokens.size(), std::size_t(3 * kSeq));
  EXPECT_EQ(mb.offsets, (std::vector<std::int64_t>{0, 2, 6}));
  EXPECT_EQ(mb.positions, (std::vector<std::int64_t>{4, 5, kSeq + 2, kSeq + 3, kSeq + 4, kSeq + 5}));
  EXPECT_EQ(mb.tokens[5], r[2].response[0]);
  EXPECT_EQ(mb.targets[4], r[2].response[0]);
  EXPECT_EQ(mb.targets[3], backend::kIgnoreTarget);
  EXPECT_EQ(mb.targets[kSeq + 5], r[0].response[3]);
  EXPECT_EQ(mb.targets[kSeq + 6], backend::kIgnoreTarget);
  for (std::int64_t t = 2 * kSeq; t < 3 * kSeq; ++t) EXPECT_EQ(mb.targets[t], backend::kIgnoreTarget);  // the empty row
}

// The prompts an iteration takes: a permutation per epoch, the same for a seed, other for another.
TEST(RlPrompts, EachEpochIsAPermutationAndIterationsContinueIt) {
  std::vector<std::size_t> seen;
  for (std::int64_t it = 0; it < 5; ++it)
    for (std::size_t p : iteration_prompts(10, 3, it, 4)) seen.push_back(p);  // 20 positions = 2 epochs
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::size_t> e(seen.begin() + epoch * 10, seen.begin() + epoch * 10 + 10);
    std::sort(e.begin(), e.end());
    for (std::size_t k = 0; k < 10; ++k) EXPECT_EQ(e[k], k) << "epoch " << epoch;
  }
  EXPECT_NE(std::vector<std::size_t>(seen.begin(), seen.begin() + 10), std::vector<std::size_t>(seen.begin() + 10, seen.end()));
  EXPECT_EQ(iteration_prompts(10, 3, 2, 4), iteration_prompts(10, 3, 2, 4));
  EXPECT_NE(iteration_prompts(10, 3, 0, 10), iteration_prompts(10, 4, 0, 10));
  // Ranks take equal slices of each mini-batch: together, every position once.
  std::vector<std::int64_t> all;
  for (int r = 0; r < 3; ++r)
    for (std::int64_t p : rank_positions(12, 6, 3, r)) all.push_back(p);
  std::sort(all.begin(), all.end());
  for (std::int64_t k = 0; k < 12; ++k) EXPECT_EQ(all[static_cast<std::size_t>(k)], k);
  EXPECT_EQ(rank_positions(12, 6, 3, 1), (std::vector<std::int64_t>{2, 3, 8, 9}));
}

}  // namespace
}  // namespace zt::rl
