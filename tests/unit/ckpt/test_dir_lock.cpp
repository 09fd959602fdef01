// ckpt.dir's lock (ckpt/dir_lock.hpp): one holder at a time, the holder named in the refusal, takeover
// only of a holder that is gone (dead pid here, the same batch job requeued, no heartbeat), release on
// destruction, and a lock taken over from under its holder noticed. No heartbeat thread: the tests
// call heartbeat() and age files by setting their mtime.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "ckpt/dir_lock.hpp"
#include "ckpt_fixture.hpp"
#include "core/error.hpp"

namespace zt::ckpt {
namespace {
using test::TempDir;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Puts a lock file of `holder` into dir, its heartbeat age_s seconds old.
void plant(const fs::path& dir, const std::string& text, double age_s) {
  fs::create_directories(dir);
  std::ofstream(dir / kLockFile) << text;
  struct timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= static_cast<time_t>(age_s);
  times[1] = times[0];
  ASSERT_EQ(utimensat(AT_FDCWD, (dir / kLockFile).c_str(), times, 0), 0);
}

LockHolder other_host(const std::string& job = "none") {
  LockHolder h = LockHolder::this_process();
  h.host = "node-elsewhere";
  h.job = job;
  h.pid = 4242;
  return h;
}

long dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

std::string refusal(const fs::path& dir, const LockHolder& me) {
  try {
    DirLock::acquire(dir, me, kStaleAfterS, 0, 0);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(DirLock, OneHolderAtATimeNamedInTheRefusalAndReleasedOnDestruction) {
  TempDir tmp;
  const fs::path dir = tmp.path / "ckpt";  // created by acquire
  LockHolder me = LockHolder::this_process();
  me.job = "777";
  {
    const DirLock lock = DirLock::acquire(dir, me, kStaleAfterS, 0);
    EXPECT_EQ(read_file(dir / kLockFile), me.text());
    EXPECT_EQ(DirLock::lost_reason(dir), "");
    const std::string why = refusal(dir, LockHolder::this_process());  // another job on this host, alive
    EXPECT_NE(why.find("is in use by another job: job 777, host " + me.host + ", pid " + std::to_string(getpid())),
              std::string::npos) << why;
    EXPECT_NE(why.find("another ckpt.dir"), std::string::npos) << why;
    EXPECT_EQ(read_file(dir / kLockFile), me.text());  // the refusal left the holder's lock alone
  }
  EXPECT_FALSE(fs::exists(dir / kLockFile));
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) ADD_FAILURE() << "left behind: " << e.path();
  const DirLock again = DirLock::acquire(dir, LockHolder::this_process(), kStaleAfterS, 0);
  EXPECT_TRUE(fs::exists(dir / kLockFile));
}

TEST(DirLock, TakesOverAHolderWhosePidIsGoneOnThisHost) {
  TempDir tmp;
  LockHolder gone = LockHolder::this_process();
  gone.pid = dead_pid();
  plant(tmp.path, gone.text(), 0);
  const LockHolder me = LockHolder::this_process();
  const DirLock lock = DirLock::acquire(tmp.path, me, kStaleAfterS, 0);
  EXPECT_EQ(read_file(tmp.path / kLockFile), me.text());
}

TEST(DirLock, AZombieHolderIsGone) {
  // Killed but not yet reaped (where PID 1 reaps slowly): kill(pid, 0) still answers; /proc says 'Z'.
  TempDir tmp;
  const pid_t child = fork();
  if (child == 0) _exit(0);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // exited, not reaped
  LockHolder zombie = LockHolder::this_process();
  zombie.pid = child;
  plant(tmp.path, zombie.text(), 0);
  EXPECT_NO_THROW(DirLock::acquire(tmp.path, LockHolder::this_process(), kStaleAfterS, 0, 0));
  waitpid(child, nullptr, 0);
}

TEST(DirLock, AnotherHostIsGoneOnlyWithoutHeartbeat) {
  TempDir tmp;
  plant(tmp.path, other_host().text(), 10);
  const std::string why = refusal(tmp.path, LockHolder::this_process());
  EXPECT_NE(why.find("host node-elsewhere, pid 4242"), std::string::npos) << why;
  plant(tmp.path, other_host().text(), kStaleAfterS + 100);
  const DirLock lock = DirLock::acquire(tmp.path, LockHolder::this_process(), kStaleAfterS, 0);
  EXPECT_EQ(DirLock::lost_reason(tmp.path), "");
}

TEST(DirLock, ARequeuedJobTakesOverItsOwnLock) {
  TempDir tmp;
  LockHolder me = LockHolder::this_process();
  me.job = "12345";
  plant(tmp.path, other_host("12345").text(), 1);  // requeued onto another node, heartbeat fresh
  { const DirLock lock = DirLock::acquire(tmp.path, me, kStaleAfterS, 0); }
  plant(tmp.path, other_host("12346").text(), 1);  // another job: refused
  EXPECT_NE(refusal(tmp.path, me).find("job 12346"), std::string::npos);
  // The same job id with its process alive here: two runs inside one job, refused too.
  LockHolder alive = LockHolder::this_process();
  alive.job = "12345";
  alive.pid = getppid();
  plant(tmp.path, alive.text(), 1);
  EXPECT_NE(refusal(tmp.path, me).find("job 12345"), std::string::npos);
}

TEST(DirLock, AnUnreadableLockIsHeldUntilItsHeartbeatIsOld) {
  TempDir tmp;
  plant(tmp.path, "garbage", 1);  // named as what it is, with both ways out
  const std::string garbage = refusal(tmp.path, LockHolder::this_process());
  EXPECT_NE(garbage.find("names no job (no job=, host=, pid= lines"), std::string::npos) << garbage;
  EXPECT_NE(garbage.find("remove it and rerun"), std::string::npos) << garbage;
  plant(tmp.path, "", 1);
  EXPECT_NE(refusal(tmp.path, LockHolder::this_process()).find("names no job (empty"), std::string::npos);
  plant(tmp.path, "", kStaleAfterS + 10);
  EXPECT_NO_THROW(DirLock::acquire(tmp.path, LockHolder::this_process(), kStaleAfterS, 0));
}

TEST(DirLock, HeartbeatRefreshesAndNoticesATakeover) {
  TempDir tmp;
  const LockHolder me = LockHolder::this_process();
  {
    const DirLock lock = DirLock::acquire(tmp.path, me, kStaleAfterS, 0);
    plant(tmp.path, me.text(), 1000);  // our own lock, its heartbeat old
    ASSERT_TRUE(lock.heartbeat());
    struct stat st {};
    ASSERT_EQ(stat((tmp.path / kLockFile).c_str(), &st), 0);
    EXPECT_LT(std::abs(static_cast<double>(st.st_mtime - time(nullptr))), kStaleAfterS);  // refreshed
    // Another job took it over (we looked gone): no heartbeat over it, and no release of its lock.
    plant(tmp.path, other_host("99").text(), 0);
    EXPECT_FALSE(lock.heartbeat());
    const std::string lost = DirLock::lost_reason(tmp.path);
    EXPECT_NE(lost.find("now names job 99, host node-elsewhere"), std::string::npos) << lost;
  }
  EXPECT_EQ(read_file(tmp.path / kLockFile), other_host("99").text());
  fs::remove(tmp.path / kLockFile);
  EXPECT_NE(DirLock::lost_reason(tmp.path).find("is gone"), std::string::npos);
}

TEST(DirLock, HolderTextRoundTrips) {
  const LockHolder h = other_host("42");
  const LockHolder back = LockHolder::parse(h.text());
  EXPECT_EQ(back.text(), h.text());
  EXPECT_EQ(back.describe(), "job 42, host node-elsewhere, pid 4242, since " + h.since);
}

}  // namespace
}  // namespace zt::ckpt
