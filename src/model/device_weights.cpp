// Weights on a backend in the compute dtype (device_weights.hpp).
#include "model/device_weights.hpp"

#include "core/error.hpp"

namespace zt::model {

DeviceWeights::DeviceWeights(backend::Backend& be, const ParamTable& table, std::span<const float> host, DType compute) {
  ZT_CHECK(host.size() == table.numel(), "DeviceWeights: ", host.size(), " values for a table of ", table.numel());
  const auto n = static_cast<std::int64_t>(host.size());
  backend::Buffer f32 = be.allocate(host.size() * sizeof(float));
  be.copy_from_host(f32.data(), host.data(), f32.bytes());
  if (compute == DType::kF32) {
    flat_ = std::move(f32);
  } else {  // the fp32 staging copy goes back as this returns
    flat_ = be.allocate(host.size() * dtype_size(compute));
    be.cast(flat_.view(compute, {n}), f32.view(DType::kF32, {n}));
  }
  params_ = std::make_unique<FlatParams>(table, flat_.view(compute, {n}));
}

DeviceWeights::DeviceWeights(const ParamTable& table, backend::Buffer flat, DType dtype) : flat_(std::move(flat)) {
  ZT_CHECK(flat_.bytes() == table.numel() * dtype_size(dtype), "DeviceWeights: ", flat_.bytes(), " bytes for a table of ",
           table.numel(), " ", dtype_name(dtype), " values");
  params_ = std::make_unique<FlatParams>(table, flat_.view(dtype, {static_cast<std::int64_t>(table.numel())}));
}

}  // namespace zt::model
