// Token reads without HDF5 for chunks that HDF5 has already verified. A shard's `tokens` chunks carry
// a Fletcher-32 checksum that HDF5 checks whenever it reads a chunk, which for a 1025-token window
// means reading and checksumming a whole 32 KiB chunk, plus the per-call overhead of HDF5. Here the
// first read that touches a chunk goes through HDF5 (verifying it) and records where the chunk lies
// in the file; later reads of that chunk are a plain pread of just the bytes asked for, with no lock.
// A chunk is thus verified once per process, on first touch: corruption present then is an error,
// as before (the bytes are not checked again, as HDF5's own chunk cache does not check them again).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

namespace zt::io {
class H5Dataset;
}

namespace zt::data {

class VerifiedChunks {
 public:
  // nullptr when the dataset does not allow it: not chunked with Fletcher-32 as its only filter, or
  // a big-endian host (the stored elements are little-endian uint16, or uint32 when `wide`).
  static std::unique_ptr<VerifiedChunks> open(const std::filesystem::path& path, const io::H5Dataset& tokens,
                                              std::uint64_t n_tokens, bool wide);
  ~VerifiedChunks();
  VerifiedChunks(const VerifiedChunks&) = delete;
  VerifiedChunks& operator=(const VerifiedChunks&) = delete;

  // After HDF5 read elements [start, start + n) without error: their chunks are verified. Records
  // where each lies (HDF5 calls: the caller serialises them as it does its reads).
  void mark_verified(const io::H5Dataset& tokens, std::uint64_t start, std::uint64_t n);
  // Elements [start, start + out.size()) as uint32 when every chunk they lie in is verified, else
  // false with nothing read. Thread-safe; no HDF5 call. A failing pread is a zt::DataError.
  bool read(std::uint64_t start, std::span<std::uint32_t> out) const;

 private:
  VerifiedChunks() = default;
  bool verified(std::uint64_t chunk) const { return offsets_[chunk].load(std::memory_order_acquire) != 0; }

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t chunk_elements_ = 0, element_bytes_ = 0, n_chunks_ = 0;
  // Per chunk: 1 + the file offset of its stored bytes once verified, 0 before (release/acquire).
  std::unique_ptr<std::atomic<std::uint64_t>[]> offsets_;
};

}  // namespace zt::data
