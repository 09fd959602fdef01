// gtest main for tests run under mpirun: every rank runs every test; only rank 0 prints the usual
// output, other ranks print failures; the process exit code is the max over ranks.
#include <gtest/gtest.h>

#include "dist/world.hpp"
#include "tests/mpi/mpi_test_world.hpp"

namespace zt::test {
dist::World* g_world = nullptr;
}

int main(int argc, char** argv) {
  auto world = zt::dist::World::init(argc, argv);
  zt::test::g_world = world.get();
  ::testing::InitGoogleTest(&argc, argv);
  if (!world->is_root()) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  const int any_failed = static_cast<int>(world->max_over_ranks(failed));
  if (world->is_root() && any_failed && !failed) std::fprintf(stderr, "a test failed on another rank\n");
  return any_failed;
}
