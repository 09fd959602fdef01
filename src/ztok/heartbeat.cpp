// Heartbeat files of a multi-rank ztok (heartbeat.hpp).
#include "ztok/heartbeat.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <system_error>

#include "core/error.hpp"

namespace zt::ztok {
namespace fs = std::filesystem;

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The file's mtime in seconds (nanosecond resolution where the file system has it); -1 if absent.
double mtime_of(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return -1;
  return static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
}

std::string read_doing(const fs::path& p) {
  std::ifstream in(p);
  std::string doing;
  std::getline(in, doing);
  return doing.empty() ? "not yet started" : doing;
}

}  // namespace

Heartbeat::Heartbeat(fs::path out, int rank, int ranks, double timeout_s)
    : out_(std::move(out)), rank_(rank), ranks_(ranks), timeout_s_(timeout_s),
      interval_s_(std::min(1.0, timeout_s / 4)) {}

fs::path Heartbeat::file_of(int rank) const { return out_ / ".ztok" / cat("alive.", rank); }

void Heartbeat::beat(const std::string& doing) {
  if (ranks_ == 1) return;  // no peer reads it
  const double now = steady_seconds();
  if (doing == doing_ && beat_at_ >= 0 && now - beat_at_ < interval_s_) return;
  doing_ = doing;
  beat_at_ = now;
  // Written aside and renamed: a peer reads either the old or the new line, never half of one.
  const fs::path file = file_of(rank_), tmp = fs::path(file).concat(".tmp");
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!(f << doing << "\n")) return;  // OUT/.ztok gone (the run is complete) or unwritable
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (!ec && start_fs_ < 0) start_fs_ = mtime_of(file);
}

void Heartbeat::check(const std::string& doing) {
  beat(doing);
  const double now_fs = mtime_of(file_of(rank_));  // the file system's "now", as of the last beat
  if (now_fs < 0 || start_fs_ < 0) return;         // no clock to judge by
  std::ostringstream stale;
  int n_stale = 0;
  for (int r = 0; r < ranks_; ++r) {
    if (r == rank_) continue;
    const double age = now_fs - std::max(mtime_of(file_of(r)), start_fs_);
    if (age <= timeout_s_) continue;
    stale << (n_stale++ ? "; " : "") << "rank " << r << " (" << read_doing(file_of(r)) << ") for " << std::fixed
          << std::setprecision(1) << age << " s";
  }
  if (n_stale == 0) return;
  throw CommError(cat("no heartbeat (", (out_ / ".ztok" / "alive.RANK").string(), " unchanged) from ", stale.str(),
                      ", over --timeout-s=", timeout_s_, ": stopped, hung or dead; aborting the job (run the same ",
                      "command again to resume)"));
}

}  // namespace zt::ztok
