// A scratch directory for one test process (the optim tests' stores write files there): emptied when made,
// removed at the end. The pid keeps tests that ctest runs side by side apart.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace zt::test {

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("zt_optim_test_" + std::to_string(::getpid()));
  TempDir() {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace zt::test
