// Atomic file replacement: write NAME.tmp, fsync it, rename it over NAME, fsync the directory. A
// reader sees the old file or the complete new one, also after a crash.
#pragma once

#include <filesystem>
#include <string_view>

namespace zt::io {

// For writers that create the file themselves (HDF5): write to tmp_path(), then commit().
// Without commit() the destructor removes the temporary file.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& tmp_path() const { return tmp_; }
  // fsync(tmp) -> rename(tmp, path) -> fsync(directory). Throws zt::IoError naming the file.
  void commit();

 private:
  std::filesystem::path path_, tmp_;
  bool committed_ = false;
};

// Writes `bytes` to `path` atomically (as AtomicFile).
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// fsync of a file's data, or of a directory's entries; throw zt::IoError naming the path.
void fsync_path(const std::filesystem::path& path);

}  // namespace zt::io
