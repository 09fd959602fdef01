// A table's checkpoint ranges under the ZeRO partition.
#include "optim/zero/model_adapters.hpp"

#include <numeric>

#include "optim/zero/partition.hpp"

namespace zt::optim {

std::vector<FlatRange> checkpoint_ranges(const model::ParamTable& table, int world_size, int rank) {
  const Partition part(units_of(table), params_of(table), world_size, rank);
  std::vector<FlatRange> out;
  for (int u = 0; u < part.n_units(); ++u) {
    const FlatRange r = part.owned(u, rank);
    if (r.numel > 0) out.push_back({r.offset, r.numel});
  }
  return out;
}

std::unique_ptr<model::DeviceWeights> gather_whole(backend::Backend& be, ZeroEngine& engine,
                                                   const model::ParamTable& table, DType dtype) {
  backend::Buffer flat = be.allocate(table.numel() * dtype_size(dtype));
  std::vector<int> order(static_cast<std::size_t>(table.n_units()));
  std::iota(order.begin(), order.end(), 0);
  engine.expect_access_order(order);
  for (int u = 0; u < table.n_units(); ++u) {
    const backend::Tensor unit = engine.param_unit(u);
    be.copy(static_cast<std::byte*>(flat.data()) + table.units()[static_cast<std::size_t>(u)].offset * dtype_size(dtype),
            unit.data, unit.bytes());
    engine.release_param_unit(u);
  }
  return std::make_unique<model::DeviceWeights>(table, std::move(flat), dtype);
}

}  // namespace zt::optim
