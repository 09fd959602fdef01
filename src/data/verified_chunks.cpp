// Verified-chunk reads: chunk offsets recorded after HDF5's checked reads, then pread of the range.
#include "data/verified_chunks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "io/hdf5.hpp"

namespace zt::data {
namespace {
constexpr std::size_t kBlockElements = 4096;  // uint16 staging on the stack: 8 KiB, 4 windows' worth

// Reads exactly `bytes` at `offset`; false on a short read or an error (errno says which: 0 = short).
bool pread_all(int fd, void* buffer, std::size_t bytes, std::uint64_t offset) {
  auto* p = static_cast<char*>(buffer);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = 0;
      return false;
    }
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}
}  // namespace

std::unique_ptr<VerifiedChunks> VerifiedChunks::open(const std::filesystem::path& path, const io::H5Dataset& tokens,
                                                     std::uint64_t n_tokens, bool wide) {
  if constexpr (std::endian::native != std::endian::little) return nullptr;
  const std::optional<std::uint64_t> chunk = tokens.checksummed_chunk_elements();
  if (!chunk || *chunk == 0 || n_tokens == 0) return nullptr;
  std::unique_ptr<VerifiedChunks> v(new VerifiedChunks());
  v->path_ = path;
  v->chunk_elements_ = *chunk;
  v->element_bytes_ = wide ? 4 : 2;
  v->n_chunks_ = (n_tokens + *chunk - 1) / *chunk;
  v->offsets_ = std::make_unique<std::atomic<std::uint64_t>[]>(v->n_chunks_);
  v->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (v->fd_ < 0) return nullptr;  // HDF5 reads still work
  return v;
}

VerifiedChunks::~VerifiedChunks() {
  if (fd_ >= 0) ::close(fd_);
}

void VerifiedChunks::mark_verified(const io::H5Dataset& tokens, std::uint64_t start, std::uint64_t n) {
  if (n == 0) return;
  const std::uint64_t stored_bytes = chunk_elements_ * element_bytes_ + 4;  // + the Fletcher-32 sum
  for (std::uint64_t c = start / chunk_elements_; c <= (start + n - 1) / chunk_elements_ && c < n_chunks_; ++c) {
    if (verified(c)) continue;
    // A chunk stored otherwise (filter skipped, other size) stays on HDF5's checked path.
    if (const std::optional<std::uint64_t> at = tokens.chunk_file_offset(c * chunk_elements_, stored_bytes))
      offsets_[c].store(*at + 1, std::memory_order_release);
  }
}

bool VerifiedChunks::read(std::uint64_t start, std::span<std::uint32_t> out) const {
  if (out.empty()) return true;
  const std::uint64_t end = start + out.size();
  for (std::uint64_t c = start / chunk_elements_; c <= (end - 1) / chunk_elements_; ++c)
    if (c >= n_chunks_ || !verified(c)) return false;
  std::uint16_t narrow[kBlockElements];
  for (std::uint64_t at = start; at < end;) {
    const std::uint64_t c = at / chunk_elements_;
    const std::uint64_t n = std::min({end, (c + 1) * chunk_elements_, at + kBlockElements}) - at;
    std::uint32_t* dest = out.data() + (at - start);
    void* buffer = element_bytes_ == 4 ? static_cast<void*>(dest) : static_cast<void*>(narrow);
    const std::uint64_t offset = offsets_[c].load(std::memory_order_acquire) - 1 + (at - c * chunk_elements_) * element_bytes_;
    const std::size_t bytes = static_cast<std::size_t>(n * element_bytes_);
    if (!pread_all(fd_, buffer, bytes, offset))
      throw DataError(cat("shard ", path_.string(), ": cannot read tokens [", at, ", ", at + n, ") at byte ", offset, ": ",
                          errno ? std::strerror(errno) : "the file is shorter than its chunk index says"));
    if (element_bytes_ == 2) std::copy(narrow, narrow + n, dest);
    at += n;
  }
  return true;
}

}  // namespace zt::data
