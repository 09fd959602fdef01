// The entry points ztrain's main hands over to once the configuration and placement are agreed:
// training, and --preflight on the backend and communicator the job would train with.
#pragma once

#include "config/derived.hpp"
#include "config/parse.hpp"
#include "dist/placement.hpp"
#include "dist/world.hpp"
#include "train/resume.hpp"

namespace zt::train {

// Whether this binary was built with the CUDA backend (train.device=auto picks it where GPUs exist).
bool cuda_backend_built();

// Trains as configured, from `resume` (share_resume) if it names a checkpoint; returns the exit code
// (0 done, 75 checkpointed on a signal or the time limit).
int run(dist::World& world, const config::CommandLine& cl, const config::Derived& derived,
        const dist::Placement& placement, const ResumePoint& resume);

// --preflight (health/preflight.hpp) over the backend and communicator wiring.hpp chooses for training,
// so it measures the paths the job will use; returns its exit code on every rank.
int run_preflight(const dist::World& world, const config::Config& config, const dist::Placement& placement);

}  // namespace zt::train
