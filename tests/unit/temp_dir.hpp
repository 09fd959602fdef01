// A scratch directory for one test process (the stores, checkpoints, shards and files the unit tests
// write): emptied when made, removed at the end. The tag names what writes there; the pid keeps tests
// that ctest runs side by side apart.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace zt::test {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag = "test")
      : path(std::filesystem::temp_directory_path() / ("zt_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace zt::test
