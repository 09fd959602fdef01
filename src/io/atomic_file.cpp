// POSIX implementation of atomic replacement (rename(2) is atomic within one file system).
#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace zt::io {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  throw IoError(cat(what, " ", path.string(), ": ", std::strerror(errno)));
}

void write_all(int fd, std::string_view bytes, const std::filesystem::path& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot write", path);
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

void fsync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open for fsync", path);
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0) fail("cannot fsync", path);
}

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)), tmp_(path_.string() + ".tmp") {}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    std::error_code ignored;
    std::filesystem::remove(tmp_, ignored);
  }
}

void AtomicFile::commit() {
  fsync_path(tmp_);
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail(cat("cannot rename ", tmp_.string(), " to"), path_);
  committed_ = true;
  const std::filesystem::path dir = path_.has_parent_path() ? path_.parent_path() : ".";
  fsync_path(dir);
}

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  AtomicFile file(path);
  const int fd = ::open(file.tmp_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", file.tmp_path());
  try {
    write_all(fd, bytes, file.tmp_path());
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fail("cannot close", file.tmp_path());
  file.commit();
}

}  // namespace zt::io
