// Backend and communicator factories (wiring.hpp): a rank's backend and communicator from its placement.
#include "train/wiring.hpp"

#include "backend/backend.hpp"
#include "config/options.hpp"
#include "core/log.hpp"
#include "dist/staged_communicator.hpp"
#include "train/attention_check.hpp"

namespace zt::train {
namespace {
// The staging's copies through the rank's backend (dist/ knows nothing of backends).
class BackendCopies final : public dist::DeviceCopies {
 public:
  explicit BackendCopies(backend::Backend& be) : be_(be) {}
  void to_host(void* host, const void* device, std::size_t bytes) override { be_.copy_to_host(host, device, bytes); }
  void to_device(void* device, const void* host, std::size_t bytes) override { be_.copy_from_host(device, host, bytes); }

 private:
  backend::Backend& be_;
};
}  // namespace

std::shared_ptr<dist::DeviceCopies> device_copies(backend::Backend& be) { return std::make_shared<BackendCopies>(be); }

std::unique_ptr<backend::Backend> make_backend(const config::Config& c, const dist::Placement& placement) {
  if (placement.device == config::Device::kCuda) {
    backend::CudaBackendOptions options;
    options.attention = attention_impl(c.train.attention);
    return backend::make_cuda_backend(placement.device_index, options);
  }
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
  return std::make_unique<dist::StagedCommunicator>(std::move(mpi), device_copies(be));
}

}  // namespace zt::train
