// RL's KL reference, whole or ZeRO-3-sharded (reference_policy.hpp).
#include "train/reference_policy.hpp"

#include "model/from_config.hpp"

namespace zt::train {

ReferencePolicy::ReferencePolicy(backend::Backend& be, const config::Config& c, const model::ParamTable& local,
                                 const ShardMap* map, dist::Communicator& dp, const optim::EngineUnits& units,
                                 const ReadGlobal& global)
    : local_(local), units_(units) {
  const DType compute = model::compute_dtype(c.train.precision);
  if (c.train.zero_stage != 3) {
    whole_ = std::make_unique<model::DeviceWeights>(be, local, local_reader(map, global), compute);
    return;
  }
  engine_ = std::make_unique<optim::ZeroEngine>(be, dp, units.ranges, optim::params_of(local), 3,
                                                optim::ZeroOptions::from(c.zero), optim::OffloadOptions{}, compute,
                                                /*frozen=*/true);
  engine_->load_params(local_reader(map, global));
  sharded_params_ = std::make_unique<optim::ZeroParams>(*engine_, &units_);
}

model::ParamSource& ReferencePolicy::params() {
  if (whole_) return whole_->params();
  engine_->expect_access_order(optim::forward_order(local_.shape().n_layer, local_.shape().tie_embeddings, units_));
  return *sharded_params_;
}

}  // namespace zt::train
