// An iteration's rollouts re-dealt over the data-parallel ranks for the update (rl.balance_rollouts,
// verl's balance_batch). Generation deals whole prompts to ranks (rank_positions), so one rank can hold
// the long responses: its packed update needs more forward passes, and every rank runs as many passes as
// the busiest (the others' are empty, kept for the collectives inside them). Each optimizer step's
// rollouts are dealt again by length, longest first onto the rank with the fewest tokens of that step so
// far. The update sums the same rollouts' gradients; only which rank computes each one changes (and with it
// the order of fp32 sums).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gen/prompt_io.hpp"
#include "rl/rollouts.hpp"

namespace zt::rl {

// The data-parallel rank that updates each rollout (indexed like `rollouts`, every rank's of the
// iteration): per optimizer step (position / mini_batch), in order of tokens (prompt + response) most
// first, ties by position and sample, each onto the rank with the fewest of the step's tokens so far, ties
// to the lower rank. A pure function of the rollouts: the same on every rank.
std::vector<int> balanced_ranks(std::span<const Rollout> rollouts, std::int64_t mini_batch, int dp);

// What the update reads of the rollouts, as bytes and back (every rank's, gathered and shared): position,
// line, sample, response, truncated, reward, advantage and the texts; a rollout's prompt is its line's.
std::string to_wire(std::span<const Rollout> rollouts);
std::vector<Rollout> from_wire(std::string_view bytes, const std::vector<gen::PromptLine>& prompts);

}  // namespace zt::rl
