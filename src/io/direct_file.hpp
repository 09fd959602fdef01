// A node-local scratch file for large aligned transfers that bypass the page cache (O_DIRECT), as the
// NVMe tier of the optimizer offload (optim/zero/nvme_store.hpp) streams its state through it. Where
// the file system refuses O_DIRECT (tmpfs: EINVAL) it falls back to buffered I/O and says so once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace zt::io {

// O_DIRECT's alignment of file offsets, lengths and buffer addresses: 4 KiB covers 512e and 4Kn
// devices (the logical block is 512 B or 4 KiB) and is the page size.
constexpr std::size_t kDirectAlign = 4096;
constexpr std::uint64_t align_up(std::uint64_t bytes) { return (bytes + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }

// Host memory aligned to kDirectAlign (posix_memalign), zeroed; move-only, freed by its destructor.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t bytes);
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  void* data() const { return data_; }
  float* floats() const { return static_cast<float*>(data_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Removes `file` if no process holds its lock (a dead run's DirectFile); true when it did.
bool remove_if_unlocked(const std::filesystem::path& file);

class DirectFile {
 public:
  // Creates `path` (its directory must exist), or reuses a stale one a dead run left (emptied first:
  // its contents are never read back), locks it against other processes (flock) and preallocates
  // `bytes` (posix_fallocate, reading back as zeros), so a disk too small fails here, not mid-run.
  // Start-up problems (no such directory, not writable, locked by a live process, too little space)
  // are ConfigError (exit 2) naming the path, the bytes needed and free, and the fix; `key` names the
  // option that chose the place ("offload.nvme_dir"); `hint` ends every mid-run I/O error (what survives,
  // what to do).
  DirectFile(const std::filesystem::path& path, std::uint64_t bytes, std::string key, std::string hint = "");
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;
  ~DirectFile();  // closes and removes the file: scratch, never kept

  // The whole of [offset, offset + bytes) or an IoError (exit 1) naming the file, the offset and the
  // errno text. Direct I/O: offset, bytes and buf aligned to kDirectAlign. Thread-safe (pread/pwrite).
  void read(std::uint64_t offset, void* buf, std::size_t bytes) const;
  void write(std::uint64_t offset, const void* buf, std::size_t bytes) const;
  // IoError if the file is gone from its directory (removed, or the directory with it): the open file
  // still works, but nothing else can see it, so the run stops rather than go on unnoticed.
  void check_present() const;

  bool direct() const { return direct_; }
  std::uint64_t bytes() const { return bytes_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void open_and_lock();
  void preallocate();
  void open_direct();  // direct_fd_, where the file system takes O_DIRECT transfers
  [[noreturn]] void fail(const char* call, std::uint64_t offset, std::size_t bytes, int err) const;
  int io_fd() const { return direct_ ? direct_fd_ : fd_; }

  std::filesystem::path path_;
  std::uint64_t bytes_ = 0;
  std::string key_, hint_;
  int fd_ = -1;         // buffered, holds the lock; the transfers' too where O_DIRECT is refused
  int direct_fd_ = -1;  // O_DIRECT
  bool direct_ = false;
};

}  // namespace zt::io
