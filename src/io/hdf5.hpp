// RAII over HDF5: files, groups, datasets, attributes and the handles behind them. Plain C++ here;
// hdf5.h stays inside io/*.cpp. Every HDF5 call is checked (ZT_H5) and a failure is a zt::IoError
// that names the file, the object and HDF5's own reason.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace zt::io {

using H5Id = std::int64_t;  // hid_t (checked in hdf5.cpp)

enum class H5Kind : std::uint8_t { kFile, kGroup, kDataset, kAttribute, kDataspace, kDatatype, kPropList };

// Owns one HDF5 identifier. Move-only; the destructor closes it and never throws.
class H5Handle {
 public:
  H5Handle() = default;
  H5Handle(H5Id id, H5Kind kind) : id_(id), kind_(kind) {}
  H5Handle(H5Handle&& o) noexcept : id_(o.id_), kind_(o.kind_) { o.id_ = -1; }
  H5Handle& operator=(H5Handle&& o) noexcept;
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  ~H5Handle() { release(); }

  H5Id get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  // Closes now and reports failure (a file close is where buffered data is written).
  void close(const std::string& where);

 private:
  void release() noexcept;
  H5Id id_ = -1;
  H5Kind kind_ = H5Kind::kFile;
};

// Element types of the 1-D datasets ztrain stores (little-endian on disk).
enum class H5Type : std::uint8_t { kU16, kU32, kU64, kI32, kF32, kU8 };

// A file or group, or a dataset: something that carries attributes. `where` names it in errors.
class H5Object {
 public:
  H5Object(H5Handle handle, std::string where) : handle_(std::move(handle)), where_(std::move(where)) {}
  H5Id id() const { return handle_.get(); }
  const std::string& where() const { return where_; }

  bool has_attr(const std::string& name) const;
  void set_attr(const std::string& name, const std::string& value);             // UTF-8 string
  void set_attr(const std::string& name, std::uint64_t value);
  void set_attr(const std::string& name, const std::vector<std::string>& values);  // 1-D strings
  std::string attr_string(const std::string& name) const;
  std::uint64_t attr_u64(const std::string& name) const;
  std::vector<std::string> attr_strings(const std::string& name) const;

 protected:
  H5Handle handle_;
  std::string where_;
};

// A dataset: 1-D ones are read and written by hyperslab (offset, count); any rank whole. Reads
// convert from the stored type to the requested one (HDF5 conversion).
class H5Dataset : public H5Object {
 public:
  using H5Object::H5Object;
  std::uint64_t length() const;  // throws unless the dataset is 1-D
  std::vector<std::uint64_t> dims() const;
  H5Type type() const;           // throws for a type ztrain never writes, naming it (type_name)
  std::string type_name() const;  // "uint16", "int64 big-endian", ...
  // Why the stored data cannot be read as written, or "": a filter this HDF5 lacks (lzf, ...), or storage
  // never (or only partly) written, whose elements would read as the fill value.
  std::string storage_problem() const;
  bool checksummed() const;       // a Fletcher-32 filter guards its chunks
  void write(std::uint64_t offset, std::span<const float> values);
  void read(std::uint64_t offset, std::span<float> out) const;
  // The whole dataset, any rank, row-major; the span's size must equal the element count.
  void write_all(std::span<const float> values);
  void write_all(std::span<const std::uint64_t> values);
  void read_all(std::span<float> out) const;
  void read_all(std::span<std::uint64_t> out) const;
  void write(std::uint64_t offset, std::span<const std::uint8_t> values);
  void write(std::uint64_t offset, std::span<const std::uint16_t> values);
  void write(std::uint64_t offset, std::span<const std::uint32_t> values);
  void write(std::uint64_t offset, std::span<const std::uint64_t> values);
  // Reading in the stored type skips HDF5's conversion and its buffer (1 MiB, zeroed on every read).
  void read(std::uint64_t offset, std::span<std::uint8_t> out) const;
  void read(std::uint64_t offset, std::span<std::uint16_t> out) const;
  void read(std::uint64_t offset, std::span<std::uint32_t> out) const;
  void read(std::uint64_t offset, std::span<std::int32_t> out) const;
  void read(std::uint64_t offset, std::span<std::uint64_t> out) const;

  // For reading chunks without HDF5 (plain pread) once it has verified them. The elements per chunk
  // when this dataset is chunked with Fletcher-32 as its only filter, so that a stored chunk is its
  // raw little-endian elements followed by the 4-byte checksum; nullopt for any other layout.
  std::optional<std::uint64_t> checksummed_chunk_elements() const;
  // Byte offset in the file of the stored chunk that starts at element `first`, when it is stored
  // with its filter applied and is `stored_bytes` long; nullopt otherwise (not allocated, filter
  // skipped, another size). `base` is file_base_offset().
  std::optional<std::uint64_t> chunk_file_offset(std::uint64_t first, std::uint64_t stored_bytes,
                                                 std::uint64_t base) const;
  // Where HDF5's addresses start in the file: after the user block, if the file has one.
  std::uint64_t file_base_offset() const;
  // The stored bytes of the chunk that starts at element `first` (filtered: data then checksum),
  // when they fill `out` exactly and the filter was applied; false otherwise (nothing read). Unlike
  // chunk_file_offset, a B-tree lookup, not a scan of the chunk index.
  bool read_stored_chunk(std::uint64_t first, std::span<std::uint8_t> out) const;

 private:
  void io(bool write, std::uint64_t offset, std::uint64_t n, H5Id mem_type, void* data) const;
  void io_all(bool write, std::uint64_t n, H5Id mem_type, void* data) const;
};

struct H5DatasetOptions {
  std::uint64_t chunk = 0;  // elements per chunk; 0 = contiguous
  bool checksum = false;    // Fletcher-32 per chunk (needs chunk > 0): corrupt data fails to read
};

class H5File : public H5Object {
 public:
  // Creates (truncating) a file in a deterministic layout: no timestamps on any object, HDF5 1.8
  // format (checksummed metadata, attributes of any size), so equal content gives equal bytes.
  static H5File create(const std::string& path);
  static H5File open_read(const std::string& path);

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const;
  H5Dataset create_dataset(const std::string& name, H5Type type, std::uint64_t length,
                           const H5DatasetOptions& options = {});
  // N-D (row-major dims); a chunked one is chunked along its first dimension only, options.chunk
  // elements per chunk at most (at least one row).
  H5Dataset create_dataset(const std::string& name, H5Type type, const std::vector<std::uint64_t>& dims,
                           const H5DatasetOptions& options = {});
  H5Dataset open_dataset(const std::string& name) const;
  void close() { handle_.close(where_); }

 private:
  H5File(H5Handle handle, std::string path) : H5Object(std::move(handle), path), path_(std::move(path)) {}
  std::string path_;
};

// Whether the HDF5 library serialises its own calls (built thread-safe), so two threads may use it.
bool hdf5_is_threadsafe();

// Turns off HDF5's printing of its error stack to stderr (errors still become exceptions). Idempotent.
void silence_hdf5_errors();

}  // namespace zt::io
