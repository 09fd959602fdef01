// The one place a rank's backend and communicator are chosen from its placement, for training and for
// --preflight alike (so a preflight measures exactly the paths the job will use).
#pragma once

#include <memory>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/communicator.hpp"
#include "dist/placement.hpp"
#include "dist/staged_communicator.hpp"
#include "dist/world.hpp"

namespace zt::train {

// CUDA on the placement's device (attention as train.attention says), else the CPU backend with the
// placement's threads (warning once that 16-bit precision on the CPU is emulated).
std::unique_ptr<backend::Backend> make_backend(const config::Config& c, const dist::Placement& placement);

// The backend's copies between its memory and the host, for dist::StagedCommunicator (the backend
// must outlive it).
std::shared_ptr<dist::DeviceCopies> device_copies(backend::Backend& be);

// NCCL ordered after the backend's compute stream; MPI on host buffers for the CPU backend; MPI
// staged through the host for device buffers (several ranks sharing one GPU).
std::unique_ptr<dist::Communicator> make_communicator(const dist::World& world, const config::Config& c,
                                                      const dist::Placement& placement, backend::Backend& be);

}  // namespace zt::train
