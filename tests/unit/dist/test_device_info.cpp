// The start-up table's guess of NCCL's inter-node transport, from the inputs NCCL reads first:
// NCCL_NET, then NCCL_IB_DISABLE, then the adapters in /sys/class/infiniband.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "dist/device_info.hpp"

namespace zt::dist {
namespace {

struct Env {  // sets (or unsets, for nullptr) a variable for one test, restoring it after
  std::string name, old;
  bool had;
  Env(const char* n, const char* v) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
    if (v) setenv(n, v, 1);
    else unsetenv(n);
  }
  ~Env() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

TEST(NcclTransport, NcclNetWinsThenIbDisableThenTheAdapters) {
  {
    Env net("NCCL_NET", "Socket"), ib("NCCL_IB_DISABLE", "1");
    EXPECT_EQ(nccl_expected_transport(), "Socket (NCCL_NET)");
  }
  {
    Env net("NCCL_NET", nullptr), ib("NCCL_IB_DISABLE", "1");
    EXPECT_EQ(nccl_expected_transport(), "sockets (NCCL_IB_DISABLE=1)");
  }
  Env net("NCCL_NET", nullptr), ib("NCCL_IB_DISABLE", "0");
  std::error_code ec;
  const bool adapters = std::filesystem::directory_iterator("/sys/class/infiniband", ec) != std::filesystem::directory_iterator();
  const std::string got = nccl_expected_transport();
  if (adapters) EXPECT_EQ(got.rfind("InfiniBand/RoCE (", 0), 0u) << got;
  else EXPECT_EQ(got, "sockets (no /sys/class/infiniband adapters)");
}

}  // namespace
}  // namespace zt::dist
