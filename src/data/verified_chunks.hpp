// Token reads that bypass HDF5 while keeping its checksums. A shard's `tokens` chunks carry a
// Fletcher-32 checksum, which HDF5 checks by reading and summing the whole 32 KiB chunk on every read
// that misses its small chunk cache, plus its per-call overhead: for a 1025-token window, most of the
// cost. Here the first read that touches a chunk fetches its stored bytes (HDF5's direct chunk read)
// and checks the stored Fletcher-32 itself (HDF5's algorithm, faster); the second looks up where the
// chunk lies in the file; every later read is a pread of just the bytes asked for, with no HDF5 call
// and no lock. The lookup waits for the second read because HDF5 1.10 finds a chunk's address by
// scanning the chunk index (cost ~ chunk number: ~70 us deep in a 100M-token shard), which a chunk
// read only once would not repay. A chunk whose sum does not match goes back to HDF5's own read,
// which reports the damage. A chunk is verified once per process, on first touch, as HDF5's chunk
// cache holds a chunk it checked.
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

// HDF5's Fletcher-32 (H5_checksum_fletcher32: 16-bit big-endian words, sums folded every 360 words),
// bit for bit.
std::uint32_t hdf5_fletcher32(std::span<const std::uint8_t> bytes);

class VerifiedChunks {
 public:
  // nullptr when the dataset does not allow it: not chunked with Fletcher-32 as its only filter, or
  // a big-endian host (the stored elements are little-endian uint16, or uint32 when `wide`).
  static std::unique_ptr<VerifiedChunks> open(const std::filesystem::path& path, const io::H5Dataset& tokens,
                                              std::uint64_t n_tokens, bool wide);
  ~VerifiedChunks();
  VerifiedChunks(const VerifiedChunks&) = delete;
  VerifiedChunks& operator=(const VerifiedChunks&) = delete;

  // Elements [start, start + out.size()) as uint32 once their chunks are verified and located; else
  // false (out unspecified). Thread-safe, no HDF5 call. A failing pread is a zt::DataError.
  bool read(std::uint64_t start, std::span<std::uint32_t> out) const;
  // The same for any chunks: verifies the ones read for the first time, locates the ones read for the
  // second (HDF5 calls: the caller serialises them as it does its reads). False (out unspecified)
  // when a chunk's stored sum does not match or it is stored otherwise (filter skipped, another
  // size): HDF5's own read must decide.
  bool read_touching(const io::H5Dataset& tokens, std::uint64_t start, std::span<std::uint32_t> out);
  // After HDF5's own read of elements [start, start + n) succeeded: their chunks are verified.
  void mark_verified(std::uint64_t start, std::uint64_t n);
  // Frees read_touching's one-chunk buffer (32-64 KiB) until its next call: a shard whose HDF5 file
  // is closed keeps only its chunk table and descriptor. Under the callers' HDF5 lock, as read_touching.
  void release_scratch() { stored_.reset(); }
  // The descriptor reads go through (-1: none): its file's identity is checked before each (shard_reader.cpp).
  int fd() const { return fd_; }

 private:
  static constexpr std::uint64_t kNoOffset = 0, kUnlocatable = ~std::uint64_t{0};

  VerifiedChunks() = default;
  std::uint64_t chunk_of(std::uint64_t element) const { return element / chunk_elements_; }
  std::uint64_t data_bytes() const { return chunk_elements_ * element_bytes_; }
  // Copies elements [at, at + n) of chunk c, as uint32, from `stored` (the chunk's bytes) or, when
  // null, from the file at its offset.
  void copy_out(std::uint64_t c, std::uint64_t at, std::uint64_t n, const std::uint8_t* stored, std::uint32_t* dest) const;

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t chunk_elements_ = 0, element_bytes_ = 0, n_chunks_ = 0;
  std::uint64_t base_ = 0;  // HDF5's address 0 in the file
  // Per chunk: kNoOffset until looked up, then 1 + the file offset of its stored bytes, or
  // kUnlocatable; and whether its sum was checked. Written with release, read with acquire.
  std::unique_ptr<std::atomic<std::uint64_t>[]> offsets_;
  std::unique_ptr<std::atomic<bool>[]> verified_;
  std::unique_ptr<std::uint8_t[]> stored_;  // one chunk's stored bytes (read_touching: under the lock)
};

}  // namespace zt::data
