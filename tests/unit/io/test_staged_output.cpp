// The offline tools' output rule (io/staged_output.hpp): guarded inputs through symlinks, `..`, hard
// links; existing outputs only with overwrite; staged writes renamed into place or removed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "io/staged_output.hpp"
#include "tests/unit/temp_dir.hpp"

namespace zt::io {
namespace {

namespace fs = std::filesystem;

struct StagingTempDir : test::TempDir {  // its own name and path beside the other io tests' (a unity build)
  StagingTempDir() : TempDir("staged_test") {}
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}
std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
// The ConfigError's message of f(), or "" if it did not throw one.
template <typename F>
std::string refusal(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
// Nothing but `keep` in dir: no staging directory, .tmp or .old left.
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(GuardedConflict, SeesThroughSymlinksDotDotAndHardLinks) {
  StagingTempDir t;
  write(t.path / "base" / "model.safetensors", "weights");
  const Guarded base{t.path / "base", "the base"};
  fs::create_directory_symlink(t.path / "base", t.path / "link");
  EXPECT_NE(guarded_conflict(t.path / "link", base).find("is the base"), std::string::npos);
  EXPECT_NE(guarded_conflict(t.path / "x" / ".." / "base", base).find("is the base"), std::string::npos);
  EXPECT_NE(guarded_conflict(t.path / "link" / "sub", base).find("lies inside the base"), std::string::npos);
  EXPECT_NE(guarded_conflict(t.path, base).find("holds the base"), std::string::npos);
  EXPECT_EQ(guarded_conflict(t.path / "other", base), "");
  EXPECT_EQ(guarded_conflict(t.path / "base2", base), "");  // a name that only starts alike
  fs::create_hard_link(t.path / "base" / "model.safetensors", t.path / "hard.safetensors");
  EXPECT_NE(guarded_conflict(t.path / "hard.safetensors", {t.path / "base" / "model.safetensors", "the weights"})
                .find("is the weights"),
            std::string::npos);
}

TEST(StagedOutput, RefusesGuardedPathsEvenWithOverwrite) {
  StagingTempDir t;
  write(t.path / "base" / "config.json", "{}");
  const std::vector<Guarded> in{{t.path / "base", "the run's base"}};
  for (bool overwrite : {false, true}) {
    EXPECT_NE(refusal([&] { StagedOutput::directory(t.path / "base", "--out", in, overwrite); })
                  .find("--out " + (t.path / "base").string() + ": is the run's base"),
              std::string::npos);
    EXPECT_NE(refusal([&] { StagedOutput::files(t.path / "base", {"m.safetensors", "config.json"}, "--out", in, overwrite); })
                  .find("lies inside the run's base"),
              std::string::npos);
  }
  EXPECT_EQ(entries(t.path), std::vector<std::string>{"base"});
}

TEST(StagedOutput, ExistingNonEmptyDirectoryNeedsOverwriteWhichReplacesItWhole) {
  StagingTempDir t;
  write(t.path / "out" / "old.txt", "old");
  EXPECT_NE(refusal([&] { StagedOutput::directory(t.path / "out", "--out", {}, false); })
                .find("exists and is not empty: give a new or empty directory, or add --overwrite"),
            std::string::npos);
  EXPECT_EQ(read(t.path / "out" / "old.txt"), "old");
  StagedOutput out = StagedOutput::directory(t.path / "out", "--out", {}, true);
  write(out.staging() / "new.txt", "new");
  EXPECT_EQ(read(t.path / "out" / "old.txt"), "old");  // untouched until the commit
  out.commit();
  EXPECT_EQ(entries(t.path / "out"), std::vector<std::string>{"new.txt"});
  EXPECT_EQ(entries(t.path), std::vector<std::string>{"out"});
}

TEST(StagedOutput, EmptyDirectoryIsFineAndMissingParentsAreCreated) {
  StagingTempDir t;
  fs::create_directory(t.path / "empty");
  StagedOutput a = StagedOutput::directory(t.path / "empty", "--out", {}, false);
  write(a.staging() / "x", "1");
  a.commit();
  StagedOutput b = StagedOutput::directory(t.path / "deep" / "er" / "out", "--out", {}, false);
  write(b.staging() / "y", "2");
  b.commit();
  EXPECT_EQ(read(t.path / "empty" / "x"), "1");
  EXPECT_EQ(read(t.path / "deep" / "er" / "out" / "y"), "2");
}

TEST(StagedOutput, AnExistingTemporaryNameIsLeftAlone) {
  StagingTempDir t;
  const std::string taken = "out." + std::to_string(::getpid()) + ".tmp";
  write(t.path / taken / "someone's.txt", "keep");
  StagedOutput out = StagedOutput::directory(t.path / "out", "--out", {}, false);
  EXPECT_NE(out.staging().filename().string(), taken);
  write(out.staging() / "x", "1");
  out.commit();
  EXPECT_EQ(read(t.path / taken / "someone's.txt"), "keep");
  EXPECT_EQ(read(t.path / "out" / "x"), "1");
}

TEST(StagedOutput, WithoutCommitNothingIsLeft) {
  StagingTempDir t;
  write(t.path / "out" / "old.txt", "old");
  {
    StagedOutput out = StagedOutput::directory(t.path / "out", "--out", {}, true);
    write(out.staging() / "half.txt", "half");
  }  // a failed write: the staging directory goes, the old output stays
  EXPECT_EQ(entries(t.path), std::vector<std::string>{"out"});
  EXPECT_EQ(entries(t.path / "out"), std::vector<std::string>{"old.txt"});
  {
    StagedOutput out = StagedOutput::files(t.path / "new" / "deep", {"m.safetensors"}, "--out", {}, false);
    write(out.staging() / "m.safetensors", "half");
  }  // the directories made for it go too
  EXPECT_EQ(entries(t.path), std::vector<std::string>{"out"});
}

TEST(StagedOutput, FilesReplaceOnlyTheirOwnNames) {
  StagingTempDir t;
  write(t.path / "d" / "notes.txt", "mine");
  write(t.path / "d" / "config.json", "old");
  EXPECT_NE(refusal([&] { StagedOutput::files(t.path / "d", {"m.safetensors", "config.json"}, "--out", {}, false); })
                .find("config.json exists (another export's?): give another path, or add --overwrite"),
            std::string::npos);
  // A config.json that already says what the export would write is no conflict (one model's files share it).
  EXPECT_NO_THROW(StagedOutput::files(t.path / "d", {"m.safetensors", "config.json"}, "--out", {}, false,
                                      {{"config.json", "old"}}));
  EXPECT_NE(refusal([&] {
              StagedOutput::files(t.path / "d", {"m.safetensors", "config.json"}, "--out", {}, false, {{"config.json", "ol"}});
            }).find("config.json exists (another export's?)"),
            std::string::npos);
  StagedOutput out = StagedOutput::files(t.path / "d", {"m.safetensors", "config.json"}, "--out", {}, true);
  write(out.staging() / "m.safetensors", "w");
  write(out.staging() / "config.json", "new");
  out.commit();
  EXPECT_EQ(entries(t.path / "d"), (std::vector<std::string>{"config.json", "m.safetensors", "notes.txt"}));
  EXPECT_EQ(read(t.path / "d" / "config.json"), "new");
}

TEST(StagedOutput, UnwritablePlaceIsAConfigErrorNamingIt) {
  StagingTempDir t;
  write(t.path / "a_file", "x");
  EXPECT_NE(refusal([&] { StagedOutput::directory(t.path / "a_file" / "out", "--out", {}, false); })
                .find("cannot create its directory " + (t.path / "a_file").string()),
            std::string::npos);
}

}  // namespace
}  // namespace zt::io
