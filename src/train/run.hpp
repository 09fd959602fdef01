// The training entry point ztrain's main hands over to once the configuration and placement are agreed.
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

}  // namespace zt::train
