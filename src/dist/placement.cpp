// Rank placement rules: auto means CUDA when this binary has the backend and a GPU is visible.
#include "dist/placement.hpp"

#include <algorithm>
#include <thread>

#include "config/derived.hpp"
#include "config/options.hpp"
#include "core/error.hpp"

namespace zt::dist {
using config::CommBackend;
using config::Device;

std::string Placement::device_name() const {
  return device == Device::kCuda ? cat("cuda:", device_index) : std::string("cpu");
}

namespace {
// key: how the caller's user names the device ("train.device", zgen's "--device").
Device resolve_device(const World& world, Device requested, bool cuda_backend_built, int gpus, const std::string& key) {
  if (requested == Device::kAuto) return cuda_backend_built && gpus > 0 ? Device::kCuda : Device::kCpu;
  const std::string eq = key.starts_with("--") ? " " : "=";
  if (requested == Device::kCuda && !cuda_backend_built)
    throw ConfigError(cat(key, eq, "cuda, but this binary has no CUDA backend: rebuild where nvcc is installed ",
                          "(tools/build.sh -DZTRAIN_CUDA=ON) or use ", key, eq, "cpu"));
  if (requested == Device::kCuda && gpus == 0)
    throw ConfigError(cat(key, eq, "cuda, but no CUDA device is visible on host ", world.host(), " (rank ", world.rank(),
                          "): check CUDA_VISIBLE_DEVICES and the driver, or use ", key, eq, "cpu"));
  return requested;
}
}  // namespace

Placement place_rank(const World& world, const config::Config& config, bool cuda_backend_built,
                     const std::string& device_key) {
  const int gpus = cuda_device_count();
  Placement p;
  p.device = resolve_device(world, config.train.device, cuda_backend_built, gpus, device_key);
  p.comm = config::comm_backend(config, p.device);
  if (p.device == Device::kCpu && p.comm == CommBackend::kNccl)
    throw ConfigError("dist.backend=nccl needs GPUs, but this rank computes on the CPU (train.device): "
                      "use dist.backend=mpi or auto");
  if (p.device == Device::kCuda) {
    if (world.local_size() > gpus && p.comm == CommBackend::kNccl)
      throw ConfigError(cat(world.local_size(), " ranks on host ", world.host(), " share ", gpus,
                            " GPU(s), and NCCL needs one GPU per rank: launch at most ", gpus,
                            " ranks per node (mpirun --map-by ppr:", gpus, ":node) or set dist.backend=mpi"));
    p.device_index = world.local_rank() % gpus;
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  p.threads = config.train.threads > 0 ? static_cast<int>(config.train.threads)
                                       : std::max(1, cores / world.local_size());
  return p;
}

}  // namespace zt::dist
