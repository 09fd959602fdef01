// Room for more open files (fd_limit.hpp).
#include "io/fd_limit.hpp"

#include <sys/resource.h>

#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "core/log.hpp"

namespace zt::io {
namespace {
constexpr std::uint64_t kSpare = 128;  // sockets, logs, checkpoints and libraries' own files

std::uint64_t open_now() {
  std::error_code ec;
  std::uint64_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}
}  // namespace

void make_room_for_files(std::uint64_t more, const std::string& what) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;  // nothing to go by: the opens will say
  const std::uint64_t need = open_now() + more + kSpare;
  if (limit.rlim_cur == RLIM_INFINITY || need <= limit.rlim_cur) return;
  if (limit.rlim_max != RLIM_INFINITY && need > limit.rlim_max)
    throw InputError(cat(what, " need about ", more, " open files (", need, " with those open now), over this process's hard "
                         "limit of ", limit.rlim_max, " (ulimit -Hn): raise it (the scheduler's or /etc/security/limits.conf), "
                         "or write fewer, larger shards (ztok --shard-tokens)"));
  const rlim_t was = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? need : limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
    throw InputError(cat(what, " need about ", more, " open files, over this process's limit of ", was,
                         " (ulimit -n), which could not be raised: raise it before the launch, or write fewer, larger "
                         "shards (ztok --shard-tokens)"));
  log::info(cat(what, " keep about ", more, " files open: the open-file limit is raised from ", was, " to ",
                limit.rlim_cur, " (ulimit -n)"));
}

}  // namespace zt::io
