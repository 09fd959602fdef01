// PPO's critic (rl.algorithm=ppo): a value-head model of the actor's family and shape
// (model::value_model_shape: the LM head replaced by score.weight [1, C], as verl's critic, a
// *ForTokenClassification with one label), started from the actor's initial weights (init.from, else
// train.seed's initialisation) with a freshly initialised head, and trained by its own ZeRO engine and
// AdamW state at rl.critic_lr on the value loss, which the caller computes on the host from values() and
// hands back as per-token gradients. It runs on the actor's layout: tensor-parallel over the actor's TP
// group (Megatron's split; the head replicated), ZeRO over the data-parallel group at train.zero_stage.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "config/config.hpp"
#include "dist/grid.hpp"
#include "dist/world.hpp"
#include "model/model.hpp"
#include "optim/zero/engine.hpp"
#include "optim/zero/model_adapters.hpp"
#include "rl/rollouts.hpp"
#include "train/shard_map.hpp"

namespace zt::train {

class Critic {
 public:
  // tp_group: the actor's (null at tp = 1); dp: the data-parallel group the engine shards over;
  // offload_threads as the actor's engine (train.offload=optimizer: > 0).
  Critic(backend::Backend& backend, const config::Config& config, dist::Communicator& dp, dist::Communicator* tp_group,
         const dist::Grid& grid, int offload_threads);
  ~Critic();

  // Collective: the initial weights (every rank reads init.from, as the actor does). A resumed PPO run
  // loads the checkpoint's critic instead (Checkpointer::load_critic).
  void init(dist::World& world);

  // The micro-batch's per-token values [rows * seq_len] (the forward only; for the rollouts' old values).
  const std::vector<float>& values(const rl::MicroBatch& mb);
  // One optimizer step over a mini-batch: zero_grads(), then per micro-batch forward_for_update (its
  // values) and backward (d(loss)/d(value) per token, [rows * seq_len]), then step().
  void zero_grads();
  const std::vector<float>& forward_for_update(const rl::MicroBatch& mb);
  void backward(const std::vector<float>& dvalues, bool last_micro_batch);
  // Reduces the gradients, clips them at optim.grad_clip, applies AdamW at rl.critic_lr's schedule for
  // iteration `iteration`; returns the gradient norm before clipping.
  double step(std::int64_t iteration, std::int64_t adam_step);

  // What the checkpointer saves and loads (Checkpointer::add_critic): the whole critic's table, the
  // engine over this rank's part, and how that part maps to the whole (null at tp = 1).
  const model::ParamTable& table() const { return table_; }
  optim::ZeroEngine& engine() { return *engine_; }
  const ShardMap* shard_map() const { return shard_map_ ? &*shard_map_ : nullptr; }

 private:
  // The forward pass; `backward`: one follows (the engine's access order covers both passes).
  const std::vector<float>& forward(const rl::MicroBatch& mb, bool backward);

  const config::Config& config_;
  config::OptimConfig optim_;  // optim with the critic's learning rate
  dist::Communicator* tp_group_;
  model::ParamTable table_;                     // the whole critic
  std::optional<model::ParamTable> local_table_;  // tp > 1: this rank's shard
  std::optional<ShardMap> shard_map_;
  std::unique_ptr<model::Model> model_;
  optim::EngineUnits units_;  // engine_'s: the token embedding in pieces at ZeRO 2-3 (zero.split_vocab)
  std::unique_ptr<optim::ZeroEngine> engine_;
  std::unique_ptr<model::ParamSource> params_;
  std::unique_ptr<model::GradSink> grads_;
};

}  // namespace zt::train
