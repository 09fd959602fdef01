// Token reads that bypass HDF5 while keeping its checksums. A shard's `tokens` chunks carry a
// Fletcher-32 checksum, which HDF5 checks by reading and summing the whole 32 KiB chunk on every read
// that misses its small chunk cache, plus its per-call overhead: for a 1025-token window, most of the
// cost. Here a chunk's file offset is looked up once (HDF5, the caller's lock), the first read that
// touches the chunk reads it whole with pread and checks the stored Fletcher-32 (HDF5's algorithm),
// and later reads are a pread of just the bytes asked for. No lock: pread needs none. A chunk whose
// sum does not match goes back to HDF5, which reports the damage (or accepts HDF5 1.6's byte order).
// A chunk is verified once per process, on first touch, as HDF5's chunk cache holds a chunk it checked.
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

  // Looks up where the chunks of elements [start, start + n) are stored (HDF5 calls: the caller
  // serialises them as it does its reads). A chunk stored otherwise (filter skipped, another size)
  // stays with HDF5.
  void locate(const io::H5Dataset& tokens, std::uint64_t start, std::uint64_t n);
  // After HDF5 read elements [start, start + n) without error: their located chunks are verified.
  void mark_verified(std::uint64_t start, std::uint64_t n);
  // Elements [start, start + out.size()) as uint32, verifying chunks read for the first time; false
  // (out unspecified) when a chunk is not located or its checksum does not match. Thread-safe, no
  // HDF5 call. A failing pread is a zt::DataError.
  bool read(std::uint64_t start, std::span<std::uint32_t> out) const;

 private:
  VerifiedChunks() = default;
  bool verify(std::uint64_t chunk) const;  // reads the whole chunk and checks its sum

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t chunk_elements_ = 0, element_bytes_ = 0, n_chunks_ = 0;
  std::uint64_t base_ = 0;  // HDF5's address 0 in the file
  // Per chunk, 0 until located, then 1 + the file offset of its stored bytes; and whether its sum was
  // checked. Written with release, read with acquire: readers on other threads see complete values.
  std::unique_ptr<std::atomic<std::uint64_t>[]> offsets_;
  std::unique_ptr<std::atomic<bool>[]> verified_;
};

}  // namespace zt::data
