// Weights on a backend in the compute dtype (device_weights.hpp).
#include "model/device_weights.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/error.hpp"

namespace zt::model {

namespace {
// Read and uploaded in blocks of at most kStagedFloats (64 MiB), a 16-bit compute dtype cast on the backend
// from fp32 staged in such a block: a whole fp32 staging copy would add 4 bytes a parameter to the peak (an
// 8B model's 32 GB on a GPU; on the CPU, beside zgen's host copy, twice the model: outside sweep 27 F2).
constexpr std::size_t kStagedFloats = std::size_t{1} << 24;
}  // namespace

DeviceWeights::DeviceWeights(backend::Backend& be, const ParamTable& table, std::span<const float> host, DType compute) {
  ZT_CHECK(host.size() == table.numel(), "DeviceWeights: ", host.size(), " values for a table of ", table.numel());
  upload(be, table, compute, [&](std::size_t at, std::size_t) { return host.data() + at; });
}

DeviceWeights::DeviceWeights(backend::Backend& be, const ParamTable& table, const ReadRange& read, DType compute) {
  std::vector<float> block(std::max<std::size_t>(std::min(table.numel(), kStagedFloats), 1));
  upload(be, table, compute, [&](std::size_t at, std::size_t count) {
    read(static_cast<std::int64_t>(at), static_cast<std::int64_t>(count), block.data());
    return static_cast<const float*>(block.data());
  });
}

void DeviceWeights::upload(backend::Backend& be, const ParamTable& table, DType compute, const HostBlock& values_at) {
  const std::size_t numel = table.numel(), block = std::max<std::size_t>(std::min(numel, kStagedFloats), 1);
  flat_ = be.allocate(numel * dtype_size(compute));
  backend::Buffer f32 = compute == DType::kF32 ? backend::Buffer() : be.allocate(block * sizeof(float));
  for (std::size_t at = 0; at < numel; at += block) {
    const std::size_t count = std::min(block, numel - at);
    const float* values = values_at(at, count);
    if (compute == DType::kF32) {
      be.copy_from_host(static_cast<float*>(flat_.data()) + at, values, count * sizeof(float));
      continue;
    }
    be.copy_from_host(f32.data(), values, count * sizeof(float));
    const auto n = static_cast<std::int64_t>(count);
    be.cast(flat_.view(compute, {n}, static_cast<std::int64_t>(at)), f32.view(DType::kF32, {n}));
  }
  params_ = std::make_unique<FlatParams>(table, flat_.view(compute, {static_cast<std::int64_t>(numel)}));
}

std::size_t DeviceWeights::staging_bytes(std::size_t numel, DType compute, bool from_reader, bool host_is_device) {
  const std::size_t block = std::min(numel, kStagedFloats) * sizeof(float);
  return (from_reader && host_is_device ? block : 0) + (compute == DType::kF32 ? 0 : block);
}

DeviceWeights::DeviceWeights(const ParamTable& table, backend::Buffer flat, DType dtype) : flat_(std::move(flat)) {
  ZT_CHECK(flat_.bytes() == table.numel() * dtype_size(dtype), "DeviceWeights: ", flat_.bytes(), " bytes for a table of ",
           table.numel(), " ", dtype_name(dtype), " values");
  params_ = std::make_unique<FlatParams>(table, flat_.view(dtype, {static_cast<std::int64_t>(table.numel())}));
}

}  // namespace zt::model
