// Backend and communicator factories (wiring.hpp): a rank's backend and communicator from its placement.
#include "train/wiring.hpp"

#include "backend/backend.hpp"
#include "config/options.hpp"
#include "core/log.hpp"
#include "train/staged_communicator.hpp"

namespace zt::train {

std::unique_ptr<backend::Backend> make_backend(const config::Config& c, const dist::Placement& placement) {
  if (placement.device == config::Device::kCuda) return backend::make_cuda_backend(placement.device_index);
  if (c.train.precision != config::Precision::kFp32)
    log::warn(cat("train.precision=", config::to_string(c.train.precision), " on the CPU backend is emulated (fp32 math, ",
                  "16-bit storage, as the CUDA backend's reference): slower than fp32 there, for checking"));
  return backend::make_cpu_backend(placement.threads);
}

std::unique_ptr<dist::Communicator> make_communicator(const dist::World& world, const config::Config& c,
                                                      const dist::Placement& placement, backend::Backend& be) {
  if (placement.comm == config::CommBackend::kNccl)
    return dist::make_nccl_communicator(world, placement.device_index, be.stream(), c.dist.timeout_s);
  std::unique_ptr<dist::Communicator> mpi = dist::make_mpi_communicator(world, c.dist.timeout_s);
  if (placement.device == config::Device::kCpu) return mpi;
  return std::make_unique<StagedCommunicator>(std::move(mpi), be);
}

}  // namespace zt::train
