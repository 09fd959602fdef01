// An RL iteration's data between the generation engine and the model (issue 33): which prompts an
// iteration takes, its responses with their rewards and advantages, and how they are laid out as the
// trainer's micro-batches. All host arithmetic, the same on every rank and world size:
//   - the prompts: iteration i takes positions [i*batch, (i+1)*batch) of an endless sequence of epochs,
//     each a permutation of the prompt set seeded by (train.seed, epoch), so the cursor is the iteration
//     number (a resume needs nothing else);
//   - mini-batch k of an iteration is its prompts [k*mini_batch, (k+1)*mini_batch), each prompt's whole
//     group; data-parallel rank r of dp takes the r-th of dp equal slices of each, so the job's
//     mini-batches do not depend on the rank count;
//   - response j of prompt p is sampled on stream (iteration*batch + p)*group + j (gen/sampling.hpp), so
//     its tokens do not depend on the rank, the batch or the slot it ran in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "gen/engine.hpp"
#include "model/lora.hpp"
#include "model/model.hpp"
#include "rl/objectives.hpp"

namespace zt::rl {

// The generation engine's options for the rollouts on one of dp data-parallel ranks: rl.slots sequences
// (at most the rank's rl.batch x rl.group_size / dp of an iteration: a slot more holds nothing) of max_len
// tokens, prompts prefilled whole (chunks of the longest prompt, prompt_len; 0: of max_len), the compute dtype, the rl.* sampling with train.seed
// (the trainer's and the memory plan's).
gen::EngineOptions engine_options(const config::Config& c, std::int64_t max_len, std::int64_t dp, std::int64_t prompt_len = 0);

// The prompt-set indices iteration `iteration` takes, in order (batch of them; a set smaller than the
// batch repeats within it, each repetition of an epoch in a new order).
std::vector<std::size_t> iteration_prompts(std::size_t n_prompts, std::uint64_t seed, std::int64_t iteration,
                                           std::int64_t batch);

// The sampling stream of response `sample` of the iteration's prompt `position` (its place in the iteration).
std::uint64_t response_stream(std::int64_t iteration, std::int64_t batch, std::int64_t position, std::int64_t group,
                              std::int64_t sample);

// The iteration's prompt positions rank `dp_rank` of `dp` generates and trains on, mini-batch after
// mini-batch (mini_batch / dp consecutive positions of each).
std::vector<std::int64_t> rank_positions(std::int64_t batch, std::int64_t mini_batch, int dp, int dp_rank);

struct Rollout {
  std::int64_t position = 0;               // the prompt's place in the iteration
  std::size_t line = 0;                    // the prompt's index in the prompt set
  int sample = 0;                          // which of its group
  std::vector<std::int32_t> prompt;        // the prompt's tokens
  std::string prompt_text, response_text;  // decoded once, for the reward and rl.rollout_dir
  std::vector<std::int32_t> response;      // the new tokens (a stop token kept: the policy chose it)
  bool truncated = false;                  // ended by rl.max_new_tokens or the context, not a stop
  double reward = 0;
  float advantage = 0;                     // GRPO, GSPO: the response's
  // PPO, per response token: GAE's whitened advantages, the returns the critic learns, the critic's
  // values at the rollout (the value loss's clip centre) (rl/ppo.hpp).
  std::vector<float> token_advantages, returns, old_values;
};

// Where a rollout sits in a forward pass's rows: row `row`, columns [column, column + its tokens).
struct Placement {
  std::size_t rollout = 0;  // index into the rank's rollouts
  int row = 0;
  std::int64_t column = 0;
};

// One forward pass's rows [rows * seq_len], padded with 0: the rollouts at their placements, a response
// token the target of the position before it, every other target ignored. Where a row holds more than
// one rollout (packed), each attends only itself (segment_starts, the model's document mask) at its own
// positions (positions_in_sequence, from 0: the position table and RoPE see it as generation did); both
// empty when every rollout starts its row (the model's defaults, the same bits as one rollout a row). The
// per-token arrays of the rollouts' response tokens (rl::Tokens) are indexed by `offsets`, in placement
// order; token k of them sits at cell `positions[k]` (where the model's token losses and loss weights are).
struct MicroBatch {
  std::vector<std::int32_t> tokens, targets;  // [rows * seq_len]
  std::vector<std::int64_t> offsets;          // per rollout, then the end (rl::Tokens::offsets)
  std::vector<std::int64_t> positions;        // per response token: its cell
  std::vector<std::size_t> which;             // the rollouts, in placement order
  std::vector<std::int32_t> segment_starts, positions_in_sequence;  // [rows * seq_len], or empty
  // LoRA dropout's runs (model::Lora::set_dropout_rows): each rollout's cells up to the next rollout or
  // its row's end, keyed as global token sequence * seq_len + its column in its own row, `sequence` the
  // rollout's place among the run's sequences (first_sequence + rollout_sequence).
  std::vector<model::Lora::DropoutRows> dropout_rows;

  // A per-position array [rows * seq_len] (the model's token losses or values) at the response tokens, in
  // token order; and the other way, per-token values into a per-position array, 0 elsewhere (the loss
  // weights the model's backward takes).
  std::vector<float> at_responses(std::span<const float> per_position) const;
  std::vector<float> to_positions(std::span<const float> per_token) const;
};

// The micro-batch of `rows` rows holding the placed rollouts (prompt + response within seq_len of their
// column; placements of one row together and in column order, not overlapping: plan_update's). first_sequence: the iteration's first
// sequence among the run's (iteration * batch * group), for the dropout keys.
MicroBatch pack(std::span<const Rollout> rollouts, std::span<const Placement> placements, int rows, std::int64_t seq_len,
                std::int64_t group = 1, std::int64_t first_sequence = 0);
// Rollouts `which` one a row, from column 0 (at most rows of them).
MicroBatch pack(std::span<const Rollout> rollouts, std::span<const std::size_t> which, int rows, std::int64_t seq_len);

// The micro-batch's layout told to a model: its segment starts and positions (none: the defaults).
void use_layout(model::Model& model, const MicroBatch& mb);

// The rollout's tokens in a row: prompt + response (what packing and the balance deal by).
std::int64_t rollout_tokens(const Rollout& r);

// The rollout's sequence among the iteration's (over all ranks): position * group + sample.
std::int64_t rollout_sequence(const Rollout& r, std::int64_t group);

// This rank's forward passes over an iteration's rollouts, per optimizer step: each pass's placements.
// The rollouts come in step order, step_sizes[s] of them in step s (the batch rules' equal shares, or
// rl.balance_rollouts' dealing). Unpacked: the step's rollouts in order, one a row, micro_batch rows a pass.
// Packed (rl.pack_rollouts): each step's rollouts by first-fit decreasing length (prompt + response; ties
// in rollout order) into rows of seq_len, micro_batch rows a pass: as many passes as the rows need.
struct UpdatePlan {
  std::vector<std::vector<std::vector<Placement>>> steps;  // [step][pass] -> placements
  std::int64_t passes(std::int64_t step) const { return static_cast<std::int64_t>(steps[static_cast<std::size_t>(step)].size()); }
  // Empty passes appended so that step s has counts[s] passes (the data-parallel group's most: every
  // rank runs as many, for the collectives inside them).
  void pad_to(std::span<const std::int64_t> counts);
  std::int64_t rows_used() const;  // rows holding a rollout, over every step
};
UpdatePlan plan_update(std::span<const Rollout> rollouts, std::span<const std::size_t> step_sizes, std::int64_t micro_batch,
                       std::int64_t seq_len, bool pack);

// How many of `rollouts` (in step order) belong to each of `steps` optimizer steps of mini_batch prompts.
std::vector<std::size_t> step_sizes(std::span<const Rollout> rollouts, std::int64_t steps, std::int64_t mini_batch);

// The objective of micro-batch `mb` (rollouts `which`, packed by pack()) given the model's token losses
// on it [rows * seq_len]: each response token's log p is minus its loss; old_logp and ref_logp hold each
// rollout's per-token values (indexed like `rollouts`; old empty: the current log p, the policy has not
// moved yet; ref empty: no KL term); token_entropies likewise per position (Model::token_entropies();
// empty: none). Evaluated with the whole mini-batch's totals (objectives.hpp), its weights scattered into
// loss_weights [rows * seq_len] (0 off the response tokens) for Model::set_loss_weights, and its entropy
// weights (when the objective has an entropy bonus) into entropy_weights for Model::set_entropy_weights.
struct MicroObjective {
  Evaluated evaluated;
  std::vector<float> loss_weights, entropy_weights;
};
MicroObjective micro_objective(const Objective& objective, const MicroBatch& mb, std::span<const Rollout> rollouts,
                               std::span<const std::size_t> which, std::span<const float> token_losses,
                               const std::vector<std::vector<float>>& old_logp,
                               const std::vector<std::vector<float>>& ref_logp, std::int64_t total_tokens,
                               std::int64_t total_responses, std::span<const float> token_entropies = {});

// GRPO's advantages into `rollouts` (groups of `group` consecutive rollouts, one prompt each; objectives.hpp).
void assign_group_advantages(std::span<Rollout> rollouts, int group, bool norm_by_std);

}  // namespace zt::rl
