// RL's batch sizes, stated per job and per rank (issue 33's "batch rules stated, not asserted"), with verl's
// names beside ours. An iteration takes `batch` prompts (verl's train_batch_size) and generates `group`
// responses to each (rollout.n); an optimizer step takes `mini_batch` prompts' responses over ALL ranks
// (ppo_mini_batch_size, which verl silently divides by the rank count; here it is never divided behind the
// user's back); each rank runs them in forward passes of `micro_batch` sequences (train.micro_batch, verl's
// ppo_micro_batch_size_per_gpu). Prompts are dealt to the data-parallel ranks whole, a prompt's group on
// one rank (its advantages need the whole group), so:
//   batch % mini_batch == 0             optimizer steps per epoch: batch / mini_batch
//   mini_batch % dp == 0                 prompts per rank per step: mini_batch / dp (batch % dp follows)
//   (mini_batch / dp * group) % micro_batch == 0   forward passes per rank per step
// A combination that does not divide is a ConfigError naming every factor and the nearest values that do.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace zt::rl {

struct BatchLayout {
  std::int64_t batch = 0, group = 1, mini_batch = 0, micro_batch = 1;
  int dp = 1;  // data-parallel ranks (the world over tp and pp)

  std::int64_t steps_per_epoch() const { return batch / mini_batch; }
  std::int64_t sequences_per_step() const { return mini_batch * group; }                  // over all ranks
  std::int64_t sequences_per_rank_step() const { return mini_batch / dp * group; }
  std::int64_t micro_batches_per_step() const { return sequences_per_rank_step() / micro_batch; }
};

// The configuration's layout on dp data-parallel ranks (rl.mini_batch 0: rl.batch).
BatchLayout layout_of(const config::Config& c, int dp);

// Throws ConfigError (keys rl.batch, rl.group_size, rl.mini_batch, train.micro_batch and the rank count)
// unless the rules above hold, naming the nearest valid values of the key at fault.
void check_batch_layout(const BatchLayout& b);

// One line for the start-up log: per iteration, per optimizer step over the job and per rank.
std::string describe(const BatchLayout& b);

}  // namespace zt::rl
