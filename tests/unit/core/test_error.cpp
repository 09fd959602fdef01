#include <gtest/gtest.h>

#include "core/error.hpp"

namespace zt {
namespace {

TEST(Check, EqFailureNamesBothValues) {
  try {
    int a = 3, b = 4;
    ZT_CHECK_EQ(a, b, "widths differ");
    FAIL() << "ZT_CHECK_EQ did not throw";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("a == b (3 vs 4)"), std::string::npos) << what;
    EXPECT_NE(what.find("widths differ"), std::string::npos) << what;
    EXPECT_EQ(e.exit_code(), kExitRuntime);
  }
}

TEST(Check, PassingCheckDoesNotThrow) {
  EXPECT_NO_THROW(ZT_CHECK(1 + 1 == 2));
  EXPECT_NO_THROW(ZT_CHECK_LT(1, 2, "never shown"));
}

TEST(Error, ConfigAndInputErrorsExitWithUsageCode) {
  EXPECT_EQ(ConfigError("x").exit_code(), kExitUsage);
  EXPECT_EQ(InputError("x").exit_code(), kExitUsage);
  EXPECT_EQ(DataError("x").exit_code(), kExitRuntime);
  EXPECT_EQ(CheckpointError("x").exit_code(), kExitRuntime);
}

}  // namespace
}  // namespace zt
