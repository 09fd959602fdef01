// Exception boundary shared by the programs' mains.
#include "apps/boundary.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "train/shared_input.hpp"  // ReportedError: header-only

namespace zt::apps {
namespace {
// Runs f; returns its exit code (0) or the code and message of what it threw.
int capture(const std::function<void()>& f, std::string& message) {
  try {
    f();
    return kExitOk;
  } catch (const train::ReportedError& e) {  // printed already, once for the job
    message.clear();
    return e.exit_code();
  } catch (const Error& e) {
    message = e.what();
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    message = "out of host memory (std::bad_alloc): see `ztrain --plan` for what this configuration needs";
  } catch (const std::exception& e) {
    message = cat("unexpected error: ", e.what());
  }
  return kExitRuntime;
}
}  // namespace

int agree_on_startup(const dist::World& world, const std::function<void()>& startup, std::string_view what) {
  std::string message;
  const int code = capture(startup, message);
  const std::string context = cat("start-up: ", what);
  long long worst = kExitOk, first = 0;
  run_or_abort(world, [&] {  // a rank that never arrives (watchdog) ends the job here
    worst = world.max_over_ranks(code, context);
    // Every rank usually fails the same way (same config): print once, from the lowest failing rank.
    if (worst != kExitOk) first = world.min_over_ranks(code != kExitOk ? world.rank() : world.size(), context);
    return kExitOk;
  });
  if (worst == kExitOk) return kExitOk;
  if (world.rank() == first && !message.empty()) log::fatal(message);
  return static_cast<int>(worst);
}

namespace {
bool writable_dir(const char* path) {
  struct stat st {};
  return path != nullptr && *path != '\0' && ::stat(path, &st) == 0 && S_ISDIR(st.st_mode) && ::access(path, W_OK | X_OK) == 0;
}

// Open MPI makes its session directory under $TMPDIR (unless OMPI_MCA_orte_tmpdir_base names one) before
// any argument is read: an unusable TMPDIR (read-only, a file) failed even --help with only Open MPI's
// abort text. Pointed at /tmp instead, saying so; where /tmp is no better, said plainly (false).
bool usable_session_dir(const char* program) {
  const char* tmpdir = std::getenv("TMPDIR");
  if (tmpdir == nullptr || *tmpdir == '\0' || std::getenv("OMPI_MCA_orte_tmpdir_base") != nullptr || writable_dir(tmpdir))
    return true;
  if (!writable_dir("/tmp")) {
    std::fprintf(stderr, "%s: TMPDIR=%s is not a writable directory, nor is /tmp: MPI needs one for its session "
                 "directory; set TMPDIR to a writable directory\n", program, tmpdir);
    return false;
  }
  ::setenv("OMPI_MCA_orte_tmpdir_base", "/tmp", 1);
  std::fprintf(stderr, "%s: warning: TMPDIR=%s is not a writable directory: MPI's session directory goes to /tmp "
               "instead (set TMPDIR to a writable directory)\n", program, tmpdir);
  return true;
}
}  // namespace

int main_with_world(const char* program, int argc, char** argv, const std::function<int(dist::World&)>& run) {
  if (!usable_session_dir(program)) return kExitUsage;
  std::unique_ptr<dist::World> world;
  try {
    world = dist::World::init(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: MPI start-up failed: %s\n", program, e.what());
    return kExitRuntime;
  }
  return run(*world);
}

int run_or_abort(const dist::World& world, const std::function<int()>& work) {
  std::string message;
  int result = kExitOk;
  const int code = capture([&] { result = work(); }, message);
  if (code == kExitOk) return result;
  if (!message.empty()) log::fatal(message);
  world.abort(code);
}

}  // namespace zt::apps
