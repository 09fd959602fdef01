// Host-side AdamW for ZeRO-Offload. The update is the CPU backend's adamw_update, so an offloaded run
// computes bit-for-bit what the same run without offload computes on the CPU backend.
#include "optim/zero/offload.hpp"

#include "backend/host_convert.hpp"
#include "core/error.hpp"

namespace zt::optim {

HostOptimizer::HostOptimizer(backend::Backend& device, std::int64_t shard_numel, int threads)
    : device_(device), host_(backend::make_cpu_backend(threads)), numel_(shard_numel) {
  const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(1, shard_numel)) * sizeof(float);
  for (backend::Buffer* b : {&master_, &exp_avg_, &exp_avg_sq_, &grad_}) {
    *b = host_->allocate(bytes);
    host_->fill_zero(view(*b));
  }
}

backend::Tensor HostOptimizer::view(const backend::Buffer& b, std::int64_t offset, std::int64_t numel) const {
  return b.view(DType::kF32, {numel < 0 ? numel_ : numel}, offset);
}

void HostOptimizer::step(const std::vector<DevicePiece>& pieces, const config::OptimConfig& o, double lr, int step,
                         double grad_scale) {
  for (const DevicePiece& d : pieces) {
    const std::int64_t at = d.piece.shard_offset, n = d.piece.numel;
    ZT_CHECK_EQ(d.grad.numel(), n);
    ZT_CHECK(d.grad.dtype == DType::kF32, "offload: gradients are fp32 (backend.hpp's precision rules)");
    device_.copy_to_host(view(grad_, at, n).data, d.grad.data, d.grad.bytes());
    host_->adamw_update(view(master_, at, n), view(grad_, at, n), view(exp_avg_, at, n), view(exp_avg_sq_, at, n), backend::Tensor(),
                        adamw_hyperparams(o, lr, step, grad_scale, d.piece.decay));
    backend::copy_from_host_f32(device_, d.param, static_cast<const float*>(view(master_, at, n).data));
  }
}

}  // namespace zt::optim
