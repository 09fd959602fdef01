// rl.balance_rollouts (rl/balance.hpp): each optimizer step's rollouts dealt again over the data-parallel
// ranks by length, the dealing a pure function of the rollouts, every rollout kept once, each in its own
// step; and the bytes the ranks exchange read back as what was written.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "rl/balance.hpp"

namespace zt::rl {
namespace {

// An iteration of 2 optimizer steps of 4 prompts x 2 samples, as generation deals them to 2 ranks (rank 0
// positions 0-1 and 4-5), rank 0's responses long and rank 1's short.
std::vector<Rollout> skewed() {
  std::vector<Rollout> r;
  for (std::int64_t position = 0; position < 8; ++position)
    for (int sample = 0; sample < 2; ++sample) {
      Rollout x{.position = position, .line = static_cast<std::size_t>(position % 3), .sample = sample};
      x.prompt.assign(3, 1);
      const bool long_one = position % 4 < 2;  // rank 0's share of each step
      x.response.assign(long_one ? 40 + position + sample : 4 + sample, 7);
      r.push_back(x);
    }
  return r;
}

// The busiest rank's tokens over the mean, for the worst optimizer step (1: even), when rollout k is
// updated by ranks[k].
double token_imbalance(const std::vector<Rollout>& r, const std::vector<int>& ranks, std::int64_t mini_batch, int dp) {
  std::map<std::int64_t, std::vector<double>> load;  // per step, per rank
  for (std::size_t k = 0; k < r.size(); ++k) {
    std::vector<double>& l = load[r[k].position / mini_batch];
    l.resize(static_cast<std::size_t>(dp), 0.0);
    l[static_cast<std::size_t>(ranks[k])] += static_cast<double>(rollout_tokens(r[k]));
  }
  double worst = 1;
  for (const auto& [step, l] : load)
    worst = std::max(worst, *std::max_element(l.begin(), l.end()) * dp / std::accumulate(l.begin(), l.end(), 0.0));
  return worst;
}

std::vector<int> dealt_by_generation(const std::vector<Rollout>& r, std::int64_t mini_batch, int dp) {
  std::vector<int> ranks;
  for (const Rollout& x : r) ranks.push_back(static_cast<int>((x.position % mini_batch) / (mini_batch / dp)));
  return ranks;
}

TEST(RlBalance, EachStepsRolloutsAreDealtByLengthOntoTheLightestRank) {
  const std::vector<Rollout> r = skewed();
  const std::vector<int> before = dealt_by_generation(r, 4, 2), after = balanced_ranks(r, 4, 2);
  EXPECT_GT(token_imbalance(r, before, 4, 2), 1.6);
  EXPECT_LT(token_imbalance(r, after, 4, 2), 1.05);
  EXPECT_EQ(balanced_ranks(r, 4, 2), after) << "a pure function: the same on every rank";
  std::map<std::pair<std::int64_t, int>, int> per_step_rank;  // (step, rank) -> rollouts
  for (std::size_t k = 0; k < r.size(); ++k) {
    ASSERT_GE(after[k], 0);
    ASSERT_LT(after[k], 2);
    ++per_step_rank[{r[k].position / 4, after[k]}];
  }
  for (const auto& [key, count] : per_step_rank) EXPECT_GT(count, 0) << "step " << key.first << " rank " << key.second;
  // One rank: everything stays on it.
  for (const int k : balanced_ranks(r, 4, 1)) EXPECT_EQ(k, 0);
}

TEST(RlBalance, RolloutsCrossTheWireWhole) {
  std::vector<Rollout> r = skewed();
  r[3].prompt_text = "1+1=";
  r[3].response_text = "2 #### 2";
  r[3].reward = 1.5, r[3].advantage = -0.25f, r[3].truncated = true;
  const std::vector<gen::PromptLine> prompts = {{1, {5, 6}}, {2, {7}}, {3, {8, 9, 10}}};
  const std::string bytes = to_wire(r);
  const std::vector<Rollout> back = from_wire(bytes, prompts);
  ASSERT_EQ(back.size(), r.size());
  for (std::size_t k = 0; k < r.size(); ++k) {
    EXPECT_EQ(back[k].position, r[k].position);
    EXPECT_EQ(back[k].sample, r[k].sample);
    EXPECT_EQ(back[k].line, r[k].line);
    EXPECT_EQ(back[k].response, r[k].response);
    EXPECT_EQ(back[k].prompt, prompts[r[k].line].ids) << "a rollout's prompt is its line's";
  }
  EXPECT_EQ(back[3].prompt_text, "1+1=");
  EXPECT_EQ(back[3].response_text, "2 #### 2");
  EXPECT_EQ(back[3].reward, 1.5);
  EXPECT_EQ(back[3].advantage, -0.25f);
  EXPECT_TRUE(back[3].truncated);
  EXPECT_TRUE(from_wire("", prompts).empty());
  EXPECT_THROW(from_wire(std::string_view(bytes).substr(0, bytes.size() - 3), prompts), Error);
}

}  // namespace
}  // namespace zt::rl
