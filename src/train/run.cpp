// ztrain's entries: build the trainer for this rank and run it; or wire --preflight's measurements.
#include "train/run.hpp"

#include "backend/backend.hpp"
#include "health/preflight.hpp"
#include "train/trainer.hpp"
#include "train/wiring.hpp"

namespace zt::train {

bool cuda_backend_built() { return backend::cuda_backend_built(); }

int run(dist::World& world, const config::CommandLine& cl, const config::Derived& derived,
        const dist::Placement& placement, const ResumePoint& resume) {
  Trainer trainer(world, cl.config, derived, placement, resume);
  return trainer.run();
}

int run_preflight(const dist::World& world, const config::Config& config, const dist::Placement& placement) {
  std::unique_ptr<backend::Backend> be = make_backend(config, placement);
  std::unique_ptr<dist::Communicator> comm = make_communicator(world, config, placement, *be);
  return health::run_preflight(world, config, placement, *be, *comm);
}

}  // namespace zt::train
