// The O_DIRECT scratch file (direct_file.hpp): preallocated at start-up, locked against a second
// process, transfers retried over short counts and EINTR, every failure named with its errno text.
#include "io/direct_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "io/dir_probe.hpp"

namespace zt::io {
namespace fs = std::filesystem;

namespace {
// "2.50 GiB (2684354560 bytes)": readable, and exact for a test or a script to compare.
std::string gib(std::uint64_t bytes) {
  char text[64];
  const bool big = bytes >= (1ull << 30);
  std::snprintf(text, sizeof text, "%.2f %s (%llu bytes)", static_cast<double>(bytes) / (big ? 1ull << 30 : 1ull << 20),
                big ? "GiB" : "MiB", static_cast<unsigned long long>(bytes));
  return text;
}
}  // namespace

AlignedBuffer::AlignedBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  if (::posix_memalign(&data_, kDirectAlign, align_up(bytes)) != 0)
    throw Error(cat("cannot allocate ", bytes, " bytes of aligned host memory (posix_memalign)"));
  std::memset(data_, 0, align_up(bytes));
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

bool remove_if_unlocked(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (free) ::unlink(file.c_str());  // under the lock, as DirectFile's destructor removes its own
  ::close(fd);
  return free;
}

DirectFile::DirectFile(const fs::path& path, std::uint64_t bytes, std::string key, std::string hint)
    : path_(path), bytes_(bytes), key_(std::move(key)), hint_(std::move(hint)) {
  try {
    open_and_lock();
    preallocate();
    open_direct();
  } catch (...) {
    if (direct_fd_ >= 0) ::close(direct_fd_);
    if (fd_ >= 0) {
      // Ours (locked) and empty or partly allocated: nothing to keep. Another process's file is never
      // reached here with fd_ open: the lock is taken before anything else.
      ::unlink(path_.c_str());
      ::close(fd_);
    }
    throw;
  }
}

DirectFile::~DirectFile() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  ::unlink(path_.c_str());  // before the lock goes with fd_: no other process can have opened it meanwhile
  ::close(fd_);
}

void DirectFile::open_and_lock() {
  const fs::path dir = path_.parent_path();
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    const int err = errno;
    throw ConfigError(cat(key_, ": cannot create ", path_.string(), ": ", std::strerror(err),
                          ". Fix: point ", key_, " at an existing, writable directory on a node-local disk"));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;  // not ours: leave the file to the process that holds it
    throw ConfigError(cat(key_, ": ", path_.string(), " is in use by another running process (",
                          err == EWOULDBLOCK ? "locked" : std::strerror(err), "). Fix: give each job its own ", key_));
  }
  if (::ftruncate(fd_, 0) != 0) {  // a dead run's stale state: never read back, and its blocks are freed
    const int err = errno;
    throw ConfigError(cat(key_, ": cannot empty ", path_.string(), ": ", std::strerror(err)));
  }
}

void DirectFile::preallocate() {
  if (bytes_ == 0) return;
  const fs::path dir = path_.parent_path();
  const std::uint64_t free = free_bytes(dir);
  auto too_small = [&](const std::string& why) {
    return ConfigError(cat(key_, ": ", dir.string(), " has ", gib(free), " free; this rank's offloaded state needs ",
                           gib(bytes_), " in ", path_.filename().string(), why, ". Fix: free space there, point ", key_,
                           " at a larger node-local disk, use more ranks (the state is sharded), or offload.to=host"));
  };
  if (free < bytes_) throw too_small("");
  const int err = ::posix_fallocate(fd_, 0, static_cast<off_t>(bytes_));
  if (err == ENOSPC) throw too_small(" (posix_fallocate: no space left on device)");
  if (err != 0)
    throw ConfigError(cat(key_, ": cannot preallocate ", gib(bytes_), " for ", path_.string(), ": ", std::strerror(err),
                          ". Fix: point ", key_, " at a local file system with room for it"));
}

void DirectFile::open_direct() {
  direct_fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC | O_DIRECT);
  int err = direct_fd_ < 0 ? errno : 0;
  if (direct_fd_ >= 0 && bytes_ >= kDirectAlign) {  // some file systems take the flag but refuse the transfers
    AlignedBuffer probe(kDirectAlign);              // zeros over zeros: the file reads as zeros already
    if (::pwrite(direct_fd_, probe.data(), kDirectAlign, 0) != static_cast<ssize_t>(kDirectAlign) ||
        ::pread(direct_fd_, probe.data(), kDirectAlign, 0) != static_cast<ssize_t>(kDirectAlign))
      err = errno;
  }
  if (err == 0) {
    direct_ = true;
    return;
  }
  if (direct_fd_ >= 0) ::close(direct_fd_);
  direct_fd_ = -1;
  log::warn(key_, ": ", path_.parent_path().string(), " refuses O_DIRECT (", std::strerror(err),
            "; tmpfs does): buffered I/O through the page cache instead, so the offloaded state also takes host memory there");
}

void DirectFile::fail(const char* call, std::uint64_t offset, std::size_t bytes, int err) const {
  throw IoError(cat(key_, ": ", call, " of ", bytes, " bytes at offset ", offset, " of ", path_.string(), " failed: ",
                    err == 0 ? "unexpected end of file (truncated by another process?)" : std::strerror(err),
                    hint_.empty() ? "" : ". ", hint_));
}

void DirectFile::read(std::uint64_t offset, void* buf, std::size_t bytes) const {
  auto* p = static_cast<char*>(buf);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t n = ::pread(io_fd(), p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("pread", offset + done, bytes - done, n < 0 ? errno : 0);
    done += static_cast<std::size_t>(n);
  }
}

void DirectFile::write(std::uint64_t offset, const void* buf, std::size_t bytes) const {
  const auto* p = static_cast<const char*>(buf);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t n = ::pwrite(io_fd(), p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("pwrite", offset + done, bytes - done, n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
}

void DirectFile::check_present() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) fail("fstat", 0, 0, errno);
  if (st.st_nlink == 0)
    throw IoError(cat(key_, ": ", path_.string(), " was removed while this run used it (its directory deleted or "
                      "unmounted?): the run stops rather than go on with state no other process can see",
                      hint_.empty() ? "" : ". ", hint_));
}

}  // namespace zt::io
