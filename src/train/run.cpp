// ztrain's training entry: build the trainer for this rank and run it.
#include "train/run.hpp"

#include "backend/backend.hpp"
#include "train/trainer.hpp"

namespace zt::train {

bool cuda_backend_built() { return backend::cuda_backend_built(); }

int run(dist::World& world, const config::CommandLine& cl, const config::Derived& derived,
        const dist::Placement& placement, const ResumePoint& resume) {
  Trainer trainer(world, cl.config, derived, placement, resume);
  return trainer.run();
}

}  // namespace zt::train
