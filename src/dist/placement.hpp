// Where each rank computes: node-local rank -> GPU (one rank per GPU for NCCL), or the CPU with its
// share of the node's cores.
#pragma once

#include <string>

#include "config/config.hpp"
#include "dist/world.hpp"

namespace zt::dist {

struct Placement {
  config::Device device = config::Device::kCpu;  // resolved: never kAuto
  int device_index = -1;                         // CUDA device ordinal, -1 on the CPU
  int threads = 1;                               // CPU threads this rank uses
  config::CommBackend comm = config::CommBackend::kMpi;  // resolved: never kAuto

  std::string device_name() const;  // "cpu" or "cuda:N"
};

// Resolves train.device, dist.backend and train.threads for this rank. cuda_backend_built says
// whether this binary can compute on GPUs at all. Throws ConfigError (e.g. more ranks on a host
// than GPUs with NCCL) naming the host, the counts and the fix; device_key: the option that chose
// train.device, as the program's user names it.
Placement place_rank(const World& world, const config::Config& config, bool cuda_backend_built,
                     const std::string& device_key = "train.device");

}  // namespace zt::dist
