// A model's weights held on a backend in the compute dtype, read by the model through a FlatParams:
// what zgen generates with, RL's reference policy (rl.kl_coef), and a ZeRO-3 run's weights gathered whole
// for generation; none of them trained.
#pragma once

#include <memory>
#include <span>

#include "backend/backend.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"

namespace zt::model {

class DeviceWeights {
 public:
  // host: table.numel() fp32 values (the table's layout, a TP shard's when the table is one); uploaded,
  // then cast to `compute` on the backend. The table must outlive this.
  DeviceWeights(backend::Backend& be, const ParamTable& table, std::span<const float> host, DType compute);
  // Weights already on the backend: flat holds table.numel() values of `dtype` in the table's layout.
  DeviceWeights(const ParamTable& table, backend::Buffer flat, DType dtype);
  ParamSource& params() { return *params_; }
  std::size_t bytes() const { return flat_.bytes(); }

 private:
  backend::Buffer flat_;
  std::unique_ptr<FlatParams> params_;
};

}  // namespace zt::model
