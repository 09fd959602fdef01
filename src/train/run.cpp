// ztrain's entries: build the trainer for this rank and run it; or wire --preflight's measurements.
#include "train/run.hpp"


#include "backend/backend.hpp"
#include "health/preflight.hpp"
#include "core/log.hpp"
#include "train/signals.hpp"
#include "train/trainer.hpp"
#include "train/wiring.hpp"

namespace zt::train {

bool cuda_backend_built() { return backend::cuda_backend_built(); }

int run(dist::World& world, const config::CommandLine& cl, const config::Derived& derived,
        const dist::Placement& placement, const ResumePoint& resume) {
  Trainer trainer(world, cl.config, derived, placement, resume);
  return trainer.run();
}

// A stop signal during the measurements (a job's time limit, scancel) lets them finish, then ends with
// 75 whatever they found: the job script requeues, as after a stopped training run.
int run_preflight(const dist::World& world, const config::Config& config, const dist::Placement& placement) {
  std::unique_ptr<backend::Backend> be = make_backend(config, placement);
  std::unique_ptr<dist::Communicator> comm = make_communicator(world, config, placement, *be);
  const int code = health::run_preflight(world, config, placement, *be, *comm);
  if (world.max_over_ranks(stop_signal_received(), "--preflight: a stop signal on any rank") == 0) return code;
  if (world.is_root())
    log::info(cat("--preflight got a stop signal (", signal_name(stop_signal_received()), " here) and finished its "
                  "measurements: exit ", kExitRequeue, " (requeue)"));
  return kExitRequeue;
}

}  // namespace zt::train
