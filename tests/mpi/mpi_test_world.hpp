// The MPI world of a test binary run under mpirun (set up by mpi_gtest_main.cpp).
#pragma once

#include "dist/world.hpp"

namespace zt::test {
extern dist::World* g_world;
inline const dist::World& world() { return *g_world; }
}  // namespace zt::test
