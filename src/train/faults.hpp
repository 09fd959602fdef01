// TEST ONLY fault injection (debug.* keys): after completing step k on rank debug.rank, throw, hang,
// or SIGKILL this process, so tests can check that a job never hangs and that resume recovers.
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace zt::train {

void inject_faults(const config::DebugConfig& debug, int rank, std::int64_t completed_step);

}  // namespace zt::train
