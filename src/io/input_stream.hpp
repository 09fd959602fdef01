// Sequential byte input from a file, decompressed on the fly by its name: NAME.gz (gzip, also
// concatenated members) and NAME.zst (Zstandard, also several frames); anything else is read as is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace zt::io {

class InputStream {
 public:
  virtual ~InputStream() = default;
  // Fills up to n bytes; returns 0 only at the end. A missing, unreadable, corrupt or truncated file
  // is a zt::IoError naming it.
  virtual std::size_t read(char* buffer, std::size_t n) = 0;
  // Bytes taken from the file itself so far (compressed bytes for .gz/.zst): progress and ETA.
  std::uint64_t file_bytes_read() const { return file_bytes_read_; }
  const std::string& path() const { return path_; }
  virtual bool compressed() const { return false; }  // .gz / .zst (by their magic bytes)

  static std::unique_ptr<InputStream> open(const std::string& path);

 protected:
  explicit InputStream(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::uint64_t file_bytes_read_ = 0;
};

// Reads the rest of a compressed `in`, dropping it (a plain one: nothing): its checksums are read only at
// the end of a member, so damage that first showed as a bad record (garbage decompressed) is then thrown
// as what it is.
void read_to_end(InputStream& in);

}  // namespace zt::io
