// A shard set keeps at most data.open_shards files open through HDF5 (shard_set.hpp): reads through a
// bounded set give the same tokens and documents as through an unbounded one, and a shard reopened after
// it changed on disk is refused.
#include <gtest/gtest.h>

#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "core/error.hpp"
#include "data/shard_set.hpp"
#include "shard_test_util.hpp"

namespace zt::data {
namespace {

using namespace testing;

// The process-wide limit, put back after each test.
class OpenShards : public ::testing::Test {
 protected:
  void TearDown() override { limit_open_shards(kDefaultOpenShards); }
};

std::int64_t open_hdf5_files() { return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE); }

TEST_F(OpenShards, ABoundedSetReadsWhatAnUnboundedOneReads) {
  TempDir dir("open_shards");
  std::vector<std::string> paths;
  std::vector<std::int32_t> stream;
  std::vector<std::uint64_t> doc_starts;
  for (std::uint32_t s = 0; s < 6; ++s) {  // 1.5 chunks each: windows cross chunk and shard boundaries
    std::vector<std::uint32_t> tokens(kShardChunkTokens * 3 / 2 + s);
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint32_t>((i * 31 + s * 977) % 50257);
    const std::vector<std::uint64_t> docs = {0, 100 + s, kShardChunkTokens + s};
    for (const std::uint64_t d : docs) doc_starts.push_back(stream.size() + d);
    stream.insert(stream.end(), tokens.begin(), tokens.end());
    paths.push_back((dir.path / cat("s", s, ".h5")).string());
    write_shard(paths.back(), tokens, docs);
  }
  const std::int64_t before = open_hdf5_files();
  limit_open_shards(2);
  const ShardSet set(paths, {});
  EXPECT_LE(open_hdf5_files() - before, 2);
  ASSERT_EQ(set.n_tokens(), stream.size());
  EXPECT_EQ(set.document_starts(0, stream.size()), doc_starts);
  // Windows in a shuffled order, three times: each chunk is verified (HDF5), located (HDF5), then read
  // without HDF5, while the open files rotate.
  const std::uint64_t window = 1025;
  std::vector<std::uint64_t> starts(stream.size() / 700);
  for (std::size_t i = 0; i < starts.size(); ++i) starts[i] = std::min<std::uint64_t>(i * 700, stream.size() - window);
  std::mt19937 rng(7);
  std::vector<std::int32_t> got(window);
  for (int pass = 0; pass < 3; ++pass) {
    std::shuffle(starts.begin(), starts.end(), rng);
    for (const std::uint64_t start : starts) {
      set.read(start, window, got.data());
      ASSERT_TRUE(std::equal(got.begin(), got.end(), stream.begin() + static_cast<std::ptrdiff_t>(start))) << start;
      ASSERT_LE(open_hdf5_files() - before, 2);
    }
  }
}

TEST_F(OpenShards, AShardChangedOnDiskIsRefusedWhenOpenedAgain) {
  TempDir dir("open_shards_changed");
  std::vector<std::string> paths;
  const std::vector<std::uint32_t> tokens(kShardChunkTokens * 2, 5);
  for (int s = 0; s < 3; ++s) {
    paths.push_back((dir.path / cat("s", s, ".h5")).string());
    write_shard(paths.back(), tokens, {0});
  }
  limit_open_shards(1);
  const ShardSet set(paths, {});  // s0 and s1 were closed as the next ones opened
  write_shard(paths[0], std::vector<std::uint32_t>(tokens.size() - 1, 6), {0});  // another run's ztok
  std::vector<std::int32_t> got(10);
  try {
    set.read(0, got.size(), got.data());
    FAIL() << "read a replaced shard";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("changed on disk during the run"), std::string::npos) << what;
    EXPECT_NE(what.find(paths[0]), std::string::npos) << what;
  }
  set.read(tokens.size() + 3, got.size(), got.data());  // the others still read
  EXPECT_EQ(got.front(), 5);
  // The same shape, vocabulary and sources, other tokens: another file in its place all the same
  // (outside sweep 27 F1).
  set.read(2 * tokens.size() + 3, got.size(), got.data());  // s2 opens, s1 closes
  write_shard(paths[1], std::vector<std::uint32_t>(tokens.size(), 7), {0});
  EXPECT_THROW(set.read(tokens.size() + kShardChunkTokens + 5, got.size(), got.data()), DataError);
}


// A shard rewritten in place (cp over it keeps the inode) while its verified chunks are read by pread on a
// kept descriptor is refused before the next read, open or not (outside sweep 29 F2: read silently).
TEST_F(OpenShards, AShardRewrittenInPlaceIsRefusedAtTheNextRead) {
  TempDir dir("open_shards_in_place");
  const std::vector<std::uint32_t> tokens(kShardChunkTokens * 2, 5);
  const std::string path = (dir.path / "s0.h5").string(), other = (dir.path / "other.h5").string();
  write_shard(path, tokens, {0});
  write_shard(other, std::vector<std::uint32_t>(tokens.size(), 9), {0});
  // An hour old: the rewrite's time differs whatever the file system's timestamp granularity.
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
  const ShardSet set({path}, {});
  std::vector<std::int32_t> got(10);
  for (int i = 0; i < 3; ++i) set.read(3, got.size(), got.data());  // checked, located, then by pread
  EXPECT_EQ(got.front(), 5);
  std::filesystem::resize_file(path, 0);  // cp's way: the same inode, truncated and written again
  {
    std::ifstream in(other, std::ios::binary);
    std::ofstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    out << in.rdbuf();
  }
  try {
    set.read(3, got.size(), got.data());
    FAIL() << "read a shard rewritten in place: " << got.front();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("rewritten in place"), std::string::npos) << e.what();
  }
}
// The shards of a ztok run that did not finish (its ztok-progress.json says "complete": false: killed,
// failed) are refused by data.train and data.valid, naming the directory and the fix; a finished run's,
// and shards without a progress file (moved out, another writer's), are read (sweep 23 F1).
TEST(ZtokFinished, AnUnfinishedRunsShardsAreRefused) {
  testing::TempDir dir("ztok_finished");
  testing::write_shard(dir.path / "train_000000.h5", std::vector<std::uint32_t>(100, 3), {0});
  const std::string glob = (dir.path / "train_*.h5").string();
  EXPECT_NO_THROW(open_shards(glob, "data.train", {}));  // no progress file
  testing::put(dir.path / kZtokProgressFile, R"({"format": "ztok-progress", "version": 1, "complete": false})");
  try {
    open_shards(glob, "data.train", {});
    FAIL() << "read an unfinished run's shards";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("data.train: the ztok run that writes " + dir.path.string() + " did not finish"), std::string::npos)
        << what;
    EXPECT_NE(what.find("Run the same ztok command again"), std::string::npos) << what;
  }
  EXPECT_THROW(open_corpora("1:" + glob, "data.train", {}), InputError);
  testing::put(dir.path / kZtokProgressFile, R"({"format": "ztok-progress", "version": 1, "complete": true})");
  EXPECT_NO_THROW(open_shards(glob, "data.train", {}));
  // An instruction run does not resume: the fix is to start it over, not "it resumes" (sweep 39 F3).
  testing::put(dir.path / kZtokProgressFile,
               R"({"format": "ztok-progress", "version": 1, "settings": {"format": "instruct"}, "complete": false})");
  try {
    open_shards(glob, "data.train", {});
    FAIL() << "read an unfinished instruction run's shards";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("an instruction run does not resume"), std::string::npos) << what;
    EXPECT_EQ(what.find("it resumes"), std::string::npos) << what;
  }
  // A progress file that cannot be read (truncated) may be an unfinished run's (sweep 39 F7g).
  testing::put(dir.path / kZtokProgressFile, R"({"format": "ztok-progress", "version": 1, "comp)");
  try {
    open_shards(glob, "data.train", {});
    FAIL() << "read shards beside a damaged progress file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be read (damaged or truncated)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zt::data
