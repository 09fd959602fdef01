// Every number any program takes has a range (issue 36): ztrain's option table and general flags, ztok's
// and zckpt's flag tables. A number without one let dist.timeout_s=1e9 overflow the start-up deadline (a
// false "rank 0 hung" in 0.5 s), 1e12 and 1e-9 abort, and ztok --pack --seq-len 1000000000 throw bad_alloc.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "apps/app_flags.hpp"
#include "config/command_line.hpp"
#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/error.hpp"

namespace zt::config {
namespace {

bool is_number_key(const Option& o) {
  return o.value_kind.find("INT") != std::string::npos || o.value_kind.find("NUM") != std::string::npos;
}

std::string range_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Ranges, EveryNumberKeyOfZtrainStatesAFiniteRangeAndRefusesBeyondIt) {
  const std::regex range(R"((INT|NUM) [\[(]-?[0-9.e+]+, [0-9.e+]+[\])]$)");  // "INT [1, 4096]", "NUM (0, 1]"
  int numbers = 0;
  for (const Option& o : options()) {
    if (!is_number_key(o)) continue;
    ++numbers;
    EXPECT_TRUE(std::regex_search(o.value_kind, range)) << o.key << " shows " << o.value_kind << ", no finite range";
    for (const char* beyond : {"1e300", "-1e300", "nan", "inf", "-inf"}) {
      Config c;
      EXPECT_NE(range_error_of([&] { o.assign(c, beyond); }), "") << o.key << "=" << beyond << " was accepted";
    }
  }
  EXPECT_GT(numbers, 60);  // the walk saw the table
}

TEST(Ranges, EveryNumberFlagOfEveryProgramStatesARange) {
  EXPECT_EQ(cli::unranged(general_flags()), std::vector<std::string>{});
  EXPECT_EQ(cli::unranged(apps::ztok_spec().flags), std::vector<std::string>{});
  EXPECT_EQ(cli::unranged(apps::zckpt_spec().flags), std::vector<std::string>{});
  EXPECT_EQ(cli::unranged(apps::zgen_spec().flags), std::vector<std::string>{});
}

TEST(Ranges, AFlagWithoutARangeIsFoundAndItsTableRefused) {
  cli::Spec spec;
  spec.program = "demo";
  spec.flags = {{.name = "n", .type = cli::Type::kInt, .min = 1}, {.name = "f", .type = cli::Type::kNum, .min = 0, .max = 1}};
  EXPECT_EQ(cli::unranged(spec.flags), std::vector<std::string>{"n"});
  const char* argv[] = {"demo", "--f", "0.5"};
  EXPECT_THROW(cli::parse(spec, 3, argv), Error);
}

TEST(Ranges, TheReportedCases) {
  const Option* timeout = find_option("dist.timeout_s");
  ASSERT_NE(timeout, nullptr);
  for (const char* t : {"1e9", "1e12", "1e-9", "0"}) {
    Config c;
    EXPECT_EQ(range_error_of([&] { timeout->assign(c, t); }), cat("dist.timeout_s=", t, ": must be in [1, 1000000]")) << t;
  }
  Config c;
  EXPECT_NO_THROW(timeout->assign(c, "1000000"));
  const char* argv[] = {"ztok", "--format", "instruct", "--chat-template", "chatml", "--pack", "--seq-len", "1000000000", "in.jsonl"};
  EXPECT_EQ(range_error_of([&] { cli::parse(apps::ztok_spec(), 9, argv); }),
            "--seq-len 1000000000: must be an integer in [1, 1048576]");
}

}  // namespace
}  // namespace zt::config
