// The NVML monitor behind the metrics' gpu_power_w and gpu_temp_c.
#include <gtest/gtest.h>

#include "health/gpu_monitor.hpp"

namespace zt::health {
namespace {
// Where no NVIDIA driver is loaded (CI), the monitor says why and reads nothing; on a lent GPU it
// reads a plausible board power and temperature.
TEST(GpuMonitor, UnavailableWithoutADriverAndPlausibleWithOne) {
  GpuMonitor m;
  if (!m.open(0)) {
    EXPECT_FALSE(m.available());
    EXPECT_FALSE(m.why_unavailable().empty());
    GTEST_SKIP() << "no NVML here: " << m.why_unavailable();
  }
  const GpuReading r = m.read();
  EXPECT_GT(r.power_w, 10.0);
  EXPECT_LT(r.power_w, 2000.0);
  EXPECT_GT(r.temp_c, 5.0);
  EXPECT_LT(r.temp_c, 110.0);
}
}  // namespace
}  // namespace zt::health
