// Deadlines (dist/deadline.hpp): a timeout past what steady_clock holds is "never", not a wrapped
// deadline in the past (dist.timeout_s=1e9 x 10 through start-up once fired a false hang at once).
#include <gtest/gtest.h>

#include <limits>

#include "dist/deadline.hpp"

namespace zt::dist {
namespace {

TEST(Deadline, TooLongForTheClockIsNeverNotThePast) {
  const Clock::time_point now = Clock::now();
  for (const double s : {1e10, 1e12, 1e300, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
    EXPECT_EQ(deadline_after(now, s), Clock::time_point::max()) << s;
  EXPECT_GT(deadline_after(now, 1e7), now + std::chrono::hours(2000));  // 10 x dist.timeout_s's largest, 1e6 s
  EXPECT_EQ(deadline_after(now, 0), now);
  EXPECT_EQ(deadline_after(now, -1), now);
  EXPECT_EQ(deadline_after(now, 2.5), now + std::chrono::milliseconds(2500));
}

// The abort's advice is the program's: zgen keeps no checkpoint to resume from (sweep 19 F5), ztrain does.
TEST(Deadline, TheAbortAdviceIsTheProgramsOwn) {
  const std::string zgen = collective_timeout_message("all_reduce", "3 s", "x", "x");
  EXPECT_EQ(zgen.substr(zgen.size() - std::string("aborting the job").size()), "aborting the job") << zgen;
  set_abort_advice(" so it can resume from the last checkpoint (ckpt.resume=auto)");
  EXPECT_NE(collective_timeout_message("all_reduce", "3 s", "x", "x").find("aborting the job so it can resume"),
            std::string::npos);
  set_abort_advice("");
}

}  // namespace
}  // namespace zt::dist
