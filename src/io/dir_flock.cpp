// flock() on an output directory's lock file, and the holder's line in it (dir_flock.hpp says why).
#include "io/dir_flock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/error.hpp"
#include "core/read_file.hpp"

namespace zt::io {

std::string DirFlock::holder_text() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown-host");
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char since[32];
  std::strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return cat("host ", host, ", pid ", ::getpid(), ", since ", since);
}

DirFlock DirFlock::take(const std::filesystem::path& lock, const std::string& label, const std::string& what_for,
                        std::string& unsupported) {
  unsupported.clear();
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(cat("cannot open the lock file ", lock.string(), ": ", std::strerror(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      std::string holder = read_file(lock).value_or("");
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\r')) holder.pop_back();
      throw InputError(cat(label, " is being written by another process (",
                           holder.empty() ? std::string("it has not named itself yet") : holder, "; lock file ",
                           lock.string(), "): ", what_for, ". Wait for it to end (or stop it), or give this run another "
                           "directory; the lock goes with its process, so nothing needs removing afterwards"));
    }
    unsupported = cat("the file system of ", lock.string(), " does not support flock (", std::strerror(err), ")");
    return DirFlock(-1);
  }
  // Ours: say who holds it, for a refused second writer. The lock, not this text, is what keeps it out.
  const std::string text = holder_text() + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    const int err = errno;
    ::close(fd);
    throw IoError(cat("cannot write the lock file ", lock.string(), ": ", std::strerror(err)));
  }
  return DirFlock(fd);
}

DirFlock::DirFlock(DirFlock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

DirFlock& DirFlock::operator=(DirFlock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

DirFlock::~DirFlock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace zt::io
