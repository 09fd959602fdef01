// Writability and free-space probes for the run's output directories (dir_probe.hpp).
#include "io/dir_probe.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace zt::io {
namespace fs = std::filesystem;

namespace {
std::string failed(const std::string& what, const fs::path& path, int err) {
  return cat("cannot ", what, " ", path.string(), ": ", std::strerror(err));
}
}  // namespace

std::string probe_writable_dir(const fs::path& dir, const std::string& host) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);  // a missing directory that can be created is fine
    if (ec) return cat("cannot create the directory ", dir.string(), ": ", ec.message());
  }
  // Unique per host and process: ranks of other nodes probe the same shared directory at once, and
  // other files in it (a lock, checkpoints) are never touched.
  const fs::path probe = dir / cat(".probe.", host, ".", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return failed("create", probe, errno);
  const char data[] = "ztrain start-up probe\n";
  std::string error;
  if (::write(fd, data, sizeof data - 1) != static_cast<ssize_t>(sizeof data - 1)) error = failed("write", probe, errno);
  else if (::fsync(fd) != 0) error = failed("fsync", probe, errno);
  if (::close(fd) != 0 && error.empty()) error = failed("close", probe, errno);
  if (::unlink(probe.c_str()) != 0 && error.empty()) error = failed("remove", probe, errno);
  return error;
}

std::string probe_appendable_file(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return failed("open for appending", file, errno);
  ::close(fd);
  return "";
}

std::uint64_t free_bytes(const fs::path& dir) {
  struct statvfs s;
  if (::statvfs(dir.c_str(), &s) != 0)
    throw IoError(failed("read the free space (statvfs) of", dir, errno));
  return static_cast<std::uint64_t>(s.f_bavail) * static_cast<std::uint64_t>(s.f_frsize);
}

}  // namespace zt::io
