// World's agreements give the textbook results on 1, 2 and 4 ranks, and their watchdog turns a rank
// that does not arrive into a CommError that, on rank 0 (which collects), names that rank.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "dist/deadline.hpp"
#include "dist/patient_wait.hpp"
#include "tests/mpi/mpi_test_world.hpp"

namespace zt::dist {
namespace {

TEST(World, AgreementsGiveTheExtremesAndEveryRanksData) {
  const World& w = test::world();
  const int r = w.rank(), n = w.size();
  EXPECT_EQ(w.max_over_ranks(r * 10 - 5, "test max"), (n - 1) * 10 - 5);
  EXPECT_EQ(w.min_over_ranks(r * 10 - 5, "test min"), -5);
  const std::vector<std::string> all = w.gather_to_root(std::string(static_cast<std::size_t>(r), 'x'), "test gather");
  ASSERT_EQ(all.size(), w.is_root() ? static_cast<std::size_t>(n) : 0u);
  for (int i = 0; i < static_cast<int>(all.size()); ++i) EXPECT_EQ(all[i], std::string(static_cast<std::size_t>(i), 'x'));
  const std::vector<std::uint64_t> both = w.all_gather({static_cast<std::uint64_t>(r), 7}, "test all-gather");
  ASSERT_EQ(both.size(), 2u * static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(both[2 * i], static_cast<std::uint64_t>(i));
    EXPECT_EQ(both[2 * i + 1], 7u);
  }
  EXPECT_EQ(w.broadcast_from_root(w.is_root() ? "from rank 0" : "ignored", "test broadcast"), "from rank 0");
  w.barrier("test barrier");
}

// Payloads over MPI's int count (a TP shard for model.h5) travel in pieces: here pieces of 7 bytes,
// so every payload below crosses several, one ends exactly on a piece and one is empty.
TEST(World, PayloadsLargerThanOneMessageArriveWhole) {
  const World& w = test::world();
  const std::size_t saved = World::max_message_bytes;
  World::max_message_bytes = 7;
  auto text = [](int r, std::size_t n) {
    std::string t(n, ' ');
    for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<char>('a' + (static_cast<std::size_t>(r) * 7 + i) % 26);
    return t;
  };
  auto length = [](int r) { return r == 1 ? std::size_t{0} : static_cast<std::size_t>(r) * 10 + 14; };  // 14 = 2 pieces
  const std::vector<std::string> all = w.gather_to_root(text(w.rank(), length(w.rank())), "test pieces");
  ASSERT_EQ(all.size(), w.is_root() ? static_cast<std::size_t>(w.size()) : 0u);
  for (int i = 0; i < static_cast<int>(all.size()); ++i) EXPECT_EQ(all[i], text(i, length(i))) << "rank " << i;
  EXPECT_EQ(w.broadcast_from_root(w.is_root() ? text(5, 100) : "ignored", "test pieces"), text(5, 100));
  const std::vector<std::uint64_t> both = w.all_gather({static_cast<std::uint64_t>(w.rank()), 1, 2}, "test pieces");
  ASSERT_EQ(both.size(), 3u * static_cast<std::size_t>(w.size()));
  for (int i = 0; i < w.size(); ++i) EXPECT_EQ(both[3 * i], static_cast<std::uint64_t>(i));
  World::max_message_bytes = saved;
}

TEST(World, WatchdogOnRootNamesTheRankThatDidNotArrive) {
  World& w = *test::g_world;
  if (w.size() < 2) GTEST_SKIP() << "needs a peer";
  const int late = w.size() - 1;
  if (w.rank() == 0) {
    // The start-up deadline's words (the default words, "dist.timeout_s=3 s", the fault tests check).
    w.set_timeout(kStartUpFactor * 0.03, start_up_limit_words(0.03));
    try {
      w.gather_to_root("", "step 7 checkpoint commit");  // empty: nothing of it is left in flight after
      ADD_FAILURE() << "no CommError although rank " << late << " was 2 s late";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find(cat("step 7 checkpoint commit: rank ", late, " did not arrive within 0.3 s "
                                               "(start-up, until step 1 completes: 10 x dist.timeout_s=0.03 s)")),
                std::string::npos) << e.what();
    }
  } else {
    if (w.rank() == late) std::this_thread::sleep_for(std::chrono::seconds(2));
    w.gather_to_root("", "step 7 checkpoint commit");
  }
  w.set_timeout(60);
  w.barrier("test barrier after the late rank");  // the late rank's message went to the abandoned receive
}

// The patient wait: the last rank works 4 x the deadline, beating as it goes, while the others arrive at
// once: they wait for it (a slow rank is not a dead one). Then the last rank stops beating for 4 x the
// deadline before it arrives: rank 0 names it (the others, left without rank 0's beats, stop too).
TEST(PatientWait, WaitsForAWorkingRankAndNamesASilentOne) {
  const World& w = test::world();
  if (w.size() == 1) GTEST_SKIP() << "needs 2 ranks";
  const int last = w.size() - 1;
  const double deadline = 0.3;
  const auto work = [&](bool beating) {
    PatientWait wait(w, deadline, "test wait", "the test's 0.3 s");
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1200);
    while (w.rank() == last && std::chrono::steady_clock::now() < until) {
      if (beating) wait.beat();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    wait.arrive();
  };
  EXPECT_NO_THROW(work(true));
  w.barrier("test: after the patient wait");
  try {
    work(false);
    ADD_FAILURE() << "rank " << w.rank() << ": a rank silent for 4 x the deadline was waited for";
  } catch (const CommError& e) {
    if (w.is_root()) EXPECT_NE(std::string(e.what()).find("test wait: rank " + std::to_string(last) + " not heard from"),
                               std::string::npos) << e.what();
    else EXPECT_NE(std::string(e.what()).find("rank 0 not heard from"), std::string::npos) << e.what();
  }
  w.barrier("test: after the silent rank");
}

// In tensor-parallel groups of 2, a silent rank is named with its group: a stopped rank's partner falls
// silent too, waiting on it in a collective, and the ranks that hear neither cannot tell which stopped
// (outside sweep 40 NEW-1: the partner alone was named).
TEST(PatientWait, NamesTheSilentRanksTensorParallelGroup) {
  const World& w = test::world();
  if (w.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int last = w.size() - 1;
  try {
    PatientWait wait(w, 0.3, "test wait", "the test's 0.3 s", 2);
    if (w.rank() == last) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    wait.arrive();
    ADD_FAILURE() << "rank " << w.rank() << ": a rank silent for 4 x the deadline was waited for";
  } catch (const CommError& e) {
    const int silent = w.is_root() ? last : 0, first = silent / 2 * 2;
    const std::string group = "a rank of tensor-parallel group " + std::to_string(first) + "-" +
                              std::to_string(std::min(first + 1, last));
    EXPECT_NE(std::string(e.what()).find(group), std::string::npos) << e.what();
  }
  w.barrier("test: after the silent group");
}

}  // namespace
}  // namespace zt::dist
