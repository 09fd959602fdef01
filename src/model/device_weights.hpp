// A model's weights held on a backend in the compute dtype, read by the model through a FlatParams:
// what zgen generates with, RL's reference policy (rl.kl_coef), and a ZeRO-3 run's weights gathered whole
// for generation; none of them trained.
#pragma once

#include <cstdint>
#include <functional>
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
  // The same from `read` (the table's flat fp32 values of a range), a block of at most 64 MiB at a time:
  // no whole fp32 copy on the host or on the backend.
  using ReadRange = std::function<void(std::int64_t offset, std::int64_t count, float* out)>;
  DeviceWeights(backend::Backend& be, const ParamTable& table, const ReadRange& read, DType compute);
  // What building one holds besides the weights, for a plan: from a ReadRange its host block, and for a
  // 16-bit compute dtype the block's fp32 copy on the backend (on the CPU backend, the host).
  static std::size_t staging_bytes(std::size_t numel, DType compute, bool from_reader, bool host_is_device);
  // Weights already on the backend: flat holds table.numel() values of `dtype` in the table's layout.
  DeviceWeights(const ParamTable& table, backend::Buffer flat, DType dtype);
  ParamSource& params() { return *params_; }
  std::size_t bytes() const { return flat_.bytes(); }

 private:
  // The table's values of [at, at + count) on the host, valid until the next call.
  using HostBlock = std::function<const float*(std::size_t at, std::size_t count)>;
  void upload(backend::Backend& be, const ParamTable& table, DType compute, const HostBlock& values_at);
  backend::Buffer flat_;
  std::unique_ptr<FlatParams> params_;
};

}  // namespace zt::model
