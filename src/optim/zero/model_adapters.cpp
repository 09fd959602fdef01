// A table's checkpoint ranges under the ZeRO partition.
#include "optim/zero/model_adapters.hpp"

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

}  // namespace zt::optim
