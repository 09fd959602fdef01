// PPO's critic (critic.hpp): the value model on the actor's layout, its engine, its update.
#include "train/critic.hpp"

#include <cmath>

#include "core/error.hpp"
#include "model/from_config.hpp"
#include "model/hf_dir.hpp"
#include "model/init.hpp"
#include "model/tp_split.hpp"
#include "optim/schedule.hpp"
#include "optim/zero/model_adapters.hpp"
#include "train/shared_input.hpp"

namespace zt::train {

Critic::Critic(backend::Backend& backend, const config::Config& config, dist::Communicator& dp,
               dist::Communicator* tp_group, const dist::Grid& grid, int offload_threads)
    : config_(config), optim_(config.optim), tp_group_(tp_group),
      table_(model::value_model_shape(model::model_shape(config.model))) {
  if (config.rl.critic_lr > 0) optim_.lr = config.rl.critic_lr;
  const DType compute = model::compute_dtype(config.train.precision);
  model::ModelOptions options{.micro_batch = static_cast<int>(config.train.micro_batch),
                              .recompute = config.train.recompute, .compute = compute};
  if (grid.tp > 1) {
    local_table_.emplace(model::tp_local_table(table_, grid.tp));
    shard_map_.emplace(ShardMap{table_, *local_table_, grid});
    options.tp_group = tp_group;
    options.sequence_parallel = config.parallel.sequence_parallel;
  }
  const model::ParamTable& mine = local_table_ ? *local_table_ : table_;
  model_ = model::make_model(backend, mine, options);
  units_ = optim::decoder_engine_units(config, mine, grid.tp_rank());
  if (shard_map_) shard_map_->engine_units = units_.ranges;
  engine_ = std::make_unique<optim::ZeroEngine>(backend, dp, units_.ranges, optim::params_of(mine),
                                                static_cast<int>(config.train.zero_stage), optim::ZeroOptions::from(config.zero),
                                                optim::offload_options(config, offload_threads, grid.rank, "critic"), compute);
  params_ = std::make_unique<optim::ZeroParams>(*engine_, &units_);
  grads_ = std::make_unique<optim::ZeroGrads>(*engine_, &units_);
}

Critic::~Critic() = default;

// The body as the actor starts (init.from's weights, or train.seed's initialisation: the same values,
// keyed by name), the value head by train.seed's initialisation (normal, std 0.02).
void Critic::init(dist::World& world) {
  std::vector<float> flat(table_.numel());
  model::init_params(table_, config_.train.seed, flat.data());
  if (!config_.init.from.empty()) {
    const model::ParamTable actor(model::model_shape(config_.model));
    std::vector<float> pretrained(actor.numel());
    read_shared_input(world, [&] { model::load_pretrained(config_.init.from, actor, pretrained.data()); },
                      cat("init.from=", config_.init.from, " (the critic's body)"));
    for (const model::ParamInfo& p : table_.params())
      if (const model::ParamInfo* from = actor.find_or_null(p.name))
        std::copy_n(pretrained.begin() + static_cast<std::ptrdiff_t>(from->offset), p.numel,
                    flat.begin() + static_cast<std::ptrdiff_t>(p.offset));
  }
  engine_->load_params(local_reader(shard_map_ ? &*shard_map_ : nullptr, read_flat(flat.data())));
}

const std::vector<float>& Critic::forward(const rl::MicroBatch& mb, bool backward) {
  const int n_layer = table_.shape().n_layer;  // the head is untied: unit 0 is asked for once
  engine_->expect_access_order(backward ? optim::forward_backward_order(n_layer, false, units_)
                                        : optim::forward_order(n_layer, false, units_));
  rl::use_layout(*model_, mb);
  model_->forward(mb.tokens.data(), nullptr, *params_);
  return model_->values();
}

const std::vector<float>& Critic::values(const rl::MicroBatch& mb) { return forward(mb, false); }

void Critic::zero_grads() { engine_->zero_grads(); }

const std::vector<float>& Critic::forward_for_update(const rl::MicroBatch& mb) { return forward(mb, true); }

void Critic::backward(const std::vector<float>& dvalues, bool last_micro_batch) {
  model_->set_loss_weights(dvalues.data());
  engine_->begin_backward(last_micro_batch);
  model_->backward(*params_, *grads_, 1.0f);
  engine_->end_backward();
  model_->set_loss_weights(nullptr);
}

double Critic::step(std::int64_t iteration, std::int64_t adam_step) {
  double norm = engine_->finish_gradients();
  if (shard_map_)
    norm = grid_grad_norm(norm, *engine_, tp_group_, shard_map_->replicated_ranges(), nullptr, shard_map_->tied_copy_ranges());
  if (!std::isfinite(norm))
    throw Error(cat("the critic's gradient norm became ", norm, " at iteration ", iteration + 1,
                    ": lower rl.critic_lr"));
  const double lr = optim::learning_rate(optim_, config_.train.max_steps, iteration);
  engine_->adamw_step(optim_, lr, static_cast<int>(adam_step), optim::clip_factor(norm, optim_.grad_clip));
  return norm;
}

}  // namespace zt::train
