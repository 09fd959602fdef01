// The MPI world of a test binary run under mpirun (set up by mpi_gtest_main.cpp).
#pragma once

#include <cstdlib>
#include <string_view>

#include "dist/world.hpp"

namespace zt::test {
extern dist::World* g_world;
inline const dist::World& world() { return *g_world; }
// ZT_TEST_FULL=1 (tools/bench/full_suite.sh): every case; unset, CI's representative subset.
inline bool full_cases() {
  const char* v = std::getenv("ZT_TEST_FULL");
  return v != nullptr && std::string_view(v) == "1";
}
}  // namespace zt::test
