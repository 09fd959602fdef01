// ZeRO-Offload (Ren et al. 2021) for train.offload=optimizer: this rank's fp32 master weights and
// AdamW moments live in host memory, not on the device. Each step the reduced gradient slice comes to
// the host, a multithreaded vectorised AdamW (the CPU backend's) updates the master there, and the
// updated parameters go back to the device (rounded to the compute dtype on the host, so bf16 moves
// half the bytes). The device then holds only parameters, gradients and activations; the host holds
// 12 bytes per owned parameter. The engine writes the master directly (master()) on load and resume.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "optim/zero/partition.hpp"

namespace zt::optim {

// The backend's AdamW arguments for one piece: weight decay only where the piece decays.
inline backend::Backend::AdamW adamw_hyperparams(const config::OptimConfig& o, double lr, int step_1based,
                                                 double grad_scale, bool decay) {
  return {static_cast<float>(lr), static_cast<float>(o.beta1), static_cast<float>(o.beta2), static_cast<float>(o.eps),
          decay ? static_cast<float>(o.weight_decay) : 0.0f, step_1based, static_cast<float>(grad_scale)};
}

class HostOptimizer {
 public:
  // shard_numel: this rank's shard buffer length; threads: host threads for the update.
  HostOptimizer(backend::Backend& device, std::int64_t shard_numel, int threads);

  // One owned piece: where its working parameters (compute dtype) and reduced fp32 gradients are on
  // the device.
  struct DevicePiece {
    ShardPiece piece;
    backend::Tensor param, grad;
  };
  // AdamW on the host for every piece, then the updated parameters back to the device.
  void step(const std::vector<DevicePiece>& pieces, const config::OptimConfig& o, double lr, int step_1based,
            double grad_scale);

  // Host views of the state (checkpoints): [shard_numel] f32 each.
  backend::Tensor master() const { return view(master_); }
  backend::Tensor exp_avg() const { return view(exp_avg_); }
  backend::Tensor exp_avg_sq() const { return view(exp_avg_sq_); }
  std::size_t host_bytes() const { return host_->memory_stats().current_bytes; }

 private:
  backend::Tensor view(const backend::Buffer& b, std::int64_t offset = 0, std::int64_t numel = -1) const;

  backend::Backend& device_;
  std::unique_ptr<backend::Backend> host_;  // host memory and the host AdamW
  std::int64_t numel_;
  backend::Buffer master_, exp_avg_, exp_avg_sq_, grad_;
};

}  // namespace zt::optim
