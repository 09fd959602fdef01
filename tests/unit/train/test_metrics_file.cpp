// The metrics file (train/metrics.hpp) holds whole JSON lines: a file a killed run left ending in half a
// line has it cut off when the next run opens it, so the resume record starts a line of its own.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "train/metrics.hpp"
#include "../temp_dir.hpp"

namespace zt::train {
namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(MetricsFile, AHalfLineALastRunLeftIsCutOffBeforeTheNextLine) {
  const test::TempDir dir("metrics_file");
  const std::filesystem::path p = dir.path / "m.jsonl";
  std::ofstream(p) << "{\"step\": 1, \"loss\": 2}\n{\"step\": 2, \"loss\": 1.9, \"step_ms\":";
  {
    MetricsLog log(p.string());
    log.event("{\"event\": \"resume\", \"step\": 1}");
  }
  EXPECT_EQ(read_all(p), "{\"step\": 1, \"loss\": 2}\n{\"event\": \"resume\", \"step\": 1}\n");
  {
    MetricsLog log(p.string());  // whole lines: kept as they are
    log.event("{\"event\": \"exit\", \"step\": 1}");
  }
  EXPECT_EQ(read_all(p), "{\"step\": 1, \"loss\": 2}\n{\"event\": \"resume\", \"step\": 1}\n{\"event\": \"exit\", \"step\": 1}\n");
  const std::filesystem::path torn_only = dir.path / "t.jsonl";
  std::ofstream(torn_only) << "{\"step\": 1, \"lo";
  { MetricsLog log(torn_only.string()); }
  EXPECT_EQ(read_all(torn_only), "");
}

}  // namespace
}  // namespace zt::train
