// HDF5 files and 1-D datasets: deterministic creation, hyperslab reads and writes.
#include <algorithm>
#include <string>
#include <vector>

#include "io/h5_check.hpp"
#include "io/hdf5.hpp"

namespace zt::io {
namespace {
// The filters of a dataset's pipeline (its creation property list), in order, with the names they carry.
struct Filter {
  H5Z_filter_t id;
  std::string name;
};
std::vector<Filter> filters_of(hid_t dcpl, const std::string& where) {
  std::vector<Filter> out;
  const int n = ZT_H5(H5Pget_nfilters(dcpl), where);
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0;
    std::size_t n_values = 0;
    char name[64] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &n_values, nullptr, sizeof name, name, nullptr);
    if (id < 0) detail::throw_h5_failure("H5Pget_filter2", where);
    out.push_back({id, name});
  }
  return out;
}
}  // namespace

H5File H5File::create(const std::string& path) {
  silence_hdf5_errors();
  const std::string w = "file " + path;
  H5Handle fcpl(ZT_H5(H5Pcreate(H5P_FILE_CREATE), w), H5Kind::kPropList);
  ZT_H5(H5Pset_obj_track_times(fcpl.get(), false), w);  // the root group: no timestamps
  H5Handle fapl(ZT_H5(H5Pcreate(H5P_FILE_ACCESS), w), H5Kind::kPropList);
  ZT_H5(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18), w);
  H5Handle file(ZT_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), w), H5Kind::kFile);
  return H5File(std::move(file), path);
}

H5File H5File::open_read(const std::string& path) {
  silence_hdf5_errors();
  H5Handle file(ZT_H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "file " + path), H5Kind::kFile);
  return H5File(std::move(file), path);
}

bool H5File::has(const std::string& name) const {
  return ZT_H5(H5Lexists(id(), name.c_str(), H5P_DEFAULT), cat(path_, ":/", name)) > 0;
}

H5Dataset H5File::create_dataset(const std::string& name, H5Type type, std::uint64_t length,
                                 const H5DatasetOptions& options) {
  return create_dataset(name, type, std::vector<std::uint64_t>{length}, options);
}

H5Dataset H5File::create_dataset(const std::string& name, H5Type type, const std::vector<std::uint64_t>& dims,
                                 const H5DatasetOptions& options) {
  const std::string w = cat(path_, ":/", name);
  const std::vector<hsize_t> shape(dims.begin(), dims.end());
  H5Handle space(ZT_H5(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr), w), H5Kind::kDataspace);
  H5Handle dcpl(ZT_H5(H5Pcreate(H5P_DATASET_CREATE), w), H5Kind::kPropList);
  ZT_H5(H5Pset_obj_track_times(dcpl.get(), false), w);
  ZT_H5(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), w);  // every element is written
  hsize_t row = 1;  // elements per index of the first dimension
  for (std::size_t d = 1; d < shape.size(); ++d) row *= shape[d];
  if (options.chunk > 0 && !shape.empty() && shape[0] > 0 && row > 0) {
    // A fixed-size dataset's chunk may not exceed it; chunk whole rows along the first dimension.
    std::vector<hsize_t> chunk = shape;
    chunk[0] = std::clamp<hsize_t>(options.chunk / row, 1, shape[0]);
    ZT_H5(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), w);
    if (options.checksum) ZT_H5(H5Pset_fletcher32(dcpl.get()), w);
  }
  H5Handle ds(ZT_H5(H5Dcreate2(id(), name.c_str(), file_type_of(type), space.get(), H5P_DEFAULT, dcpl.get(),
                               H5P_DEFAULT), w),
              H5Kind::kDataset);
  return H5Dataset(std::move(ds), w);
}

H5Dataset H5File::open_dataset(const std::string& name) const {
  const std::string w = cat(path_, ":/", name);
  return H5Dataset(H5Handle(ZT_H5(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), w), H5Kind::kDataset), w);
}

std::uint64_t H5Dataset::length() const {
  H5Handle space(ZT_H5(H5Dget_space(id()), where_), H5Kind::kDataspace);
  if (ZT_H5(H5Sget_simple_extent_ndims(space.get()), where_) != 1)
    throw IoError(cat(where_, " is not a 1-D dataset"));
  hsize_t dims = 0;
  ZT_H5(H5Sget_simple_extent_dims(space.get(), &dims, nullptr), where_);
  return dims;
}

std::vector<std::uint64_t> H5Dataset::dims() const {
  H5Handle space(ZT_H5(H5Dget_space(id()), where_), H5Kind::kDataspace);
  const int rank = ZT_H5(H5Sget_simple_extent_ndims(space.get()), where_);
  std::vector<hsize_t> d(static_cast<std::size_t>(rank));
  ZT_H5(H5Sget_simple_extent_dims(space.get(), d.data(), nullptr), where_);
  return {d.begin(), d.end()};
}

H5Type H5Dataset::type() const {
  H5Handle t(ZT_H5(H5Dget_type(id()), where_), H5Kind::kDatatype);
  for (H5Type candidate : {H5Type::kU8, H5Type::kU16, H5Type::kU32, H5Type::kU64, H5Type::kI32, H5Type::kF32})
    if (ZT_H5(H5Tequal(t.get(), file_type_of(candidate)), where_) > 0) return candidate;
  throw IoError(cat(where_, " has element type ", type_name(), ", which ztrain does not read"));
}

std::string H5Dataset::type_name() const {
  H5Handle t(ZT_H5(H5Dget_type(id()), where_), H5Kind::kDatatype);
  const std::size_t bits = 8 * H5Tget_size(t.get());
  const char* order = H5Tget_order(t.get()) == H5T_ORDER_BE ? " big-endian" : "";
  switch (H5Tget_class(t.get())) {
    case H5T_INTEGER: return cat(H5Tget_sign(t.get()) == H5T_SGN_NONE ? "uint" : "int", bits, order);
    case H5T_FLOAT: return cat("float", bits, order);
    case H5T_STRING: return "string";
    default: return cat("a compound or other non-numeric type of ", bits, " bits");
  }
}

std::string H5Dataset::storage_problem() const {
  H5Handle dcpl(ZT_H5(H5Dget_create_plist(id()), where_), H5Kind::kPropList);
  for (const Filter& f : filters_of(dcpl.get(), where_))
    if (H5Zfilter_avail(f.id) <= 0)
      return cat("its chunks are filtered by HDF5 filter ", f.id, f.name.empty() ? "" : cat(" (", f.name, ")"),
                 ", which this HDF5 library does not have (a plugin such as lzf): write it without that filter "
                 "(gzip, or none)");
  // Storage never written there would read as the fill value (0) for every element the writer skipped.
  const std::vector<std::uint64_t> shape = dims();
  std::uint64_t elements = 1;
  for (std::uint64_t d : shape) elements *= d;
  if (elements == 0) return "";
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(shape.size());
    if (ZT_H5(H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), where_) != static_cast<int>(chunk.size()))
      detail::throw_h5_failure("H5Pget_chunk", where_);
    hsize_t expected = 1, written = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) expected *= (shape[i] + chunk[i] - 1) / chunk[i];
    H5Handle space(ZT_H5(H5Dget_space(id()), where_), H5Kind::kDataspace);
    ZT_H5(H5Dget_num_chunks(id(), space.get(), &written), where_);
    if (written < expected)
      return cat("only ", written, " of its ", expected, " chunks were ever written (the writer stopped part way?): ",
                 "the rest would read as zeros");
  } else if (layout == H5D_CONTIGUOUS && H5Dget_offset(id()) == HADDR_UNDEF) {
    return "its storage was never written (the writer stopped part way?): it would read as zeros";
  }
  return "";
}

bool H5Dataset::checksummed() const {
  H5Handle dcpl(ZT_H5(H5Dget_create_plist(id()), where_), H5Kind::kPropList);
  const std::vector<Filter> filters = filters_of(dcpl.get(), where_);
  return std::any_of(filters.begin(), filters.end(), [](const Filter& f) { return f.id == H5Z_FILTER_FLETCHER32; });
}

void H5Dataset::io(bool write, std::uint64_t offset, std::uint64_t n, H5Id mem_type, void* data) const {
  if (n == 0) return;
  silence_hdf5_errors();
  const std::uint64_t len = length();
  if (offset > len || n > len - offset)
    throw IoError(cat(where_, ": elements [", offset, ", ", offset + n, ") are outside its ", len));
  H5Handle file_space(ZT_H5(H5Dget_space(id()), where_), H5Kind::kDataspace);
  const hsize_t start = offset, count = n;
  ZT_H5(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr), where_);
  H5Handle mem_space(ZT_H5(H5Screate_simple(1, &count, nullptr), where_), H5Kind::kDataspace);
  if (write) {
    ZT_H5(H5Dwrite(id(), mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data), where_);
  } else {
    ZT_H5(H5Dread(id(), mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data), where_);
  }
}

void H5Dataset::io_all(bool write, std::uint64_t n, H5Id mem_type, void* data) const {
  silence_hdf5_errors();
  std::uint64_t numel = 1;
  for (std::uint64_t d : dims()) numel *= d;
  if (n != numel) throw IoError(cat(where_, " holds ", numel, " elements, not the ", n, write ? " given" : " asked for"));
  if (n == 0) return;
  if (write) ZT_H5(H5Dwrite(id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), where_);
  else ZT_H5(H5Dread(id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), where_);
}

void H5Dataset::write(std::uint64_t offset, std::span<const float> v) {
  io(true, offset, v.size(), H5T_NATIVE_FLOAT, const_cast<float*>(v.data()));
}
void H5Dataset::read(std::uint64_t offset, std::span<float> out) const {
  io(false, offset, out.size(), H5T_NATIVE_FLOAT, out.data());
}
void H5Dataset::write_all(std::span<const float> v) { io_all(true, v.size(), H5T_NATIVE_FLOAT, const_cast<float*>(v.data())); }
void H5Dataset::write_all(std::span<const std::uint64_t> v) {
  io_all(true, v.size(), H5T_NATIVE_UINT64, const_cast<std::uint64_t*>(v.data()));
}
void H5Dataset::read_all(std::span<float> out) const { io_all(false, out.size(), H5T_NATIVE_FLOAT, out.data()); }
void H5Dataset::read_all(std::span<std::uint64_t> out) const { io_all(false, out.size(), H5T_NATIVE_UINT64, out.data()); }

void H5Dataset::write(std::uint64_t offset, std::span<const std::uint8_t> v) {
  io(true, offset, v.size(), H5T_NATIVE_UINT8, const_cast<std::uint8_t*>(v.data()));
}
void H5Dataset::read(std::uint64_t offset, std::span<std::uint8_t> out) const {
  io(false, offset, out.size(), H5T_NATIVE_UINT8, out.data());
}
void H5Dataset::write(std::uint64_t offset, std::span<const std::uint16_t> v) {
  io(true, offset, v.size(), H5T_NATIVE_UINT16, const_cast<std::uint16_t*>(v.data()));
}
void H5Dataset::write(std::uint64_t offset, std::span<const std::uint32_t> v) {
  io(true, offset, v.size(), H5T_NATIVE_UINT32, const_cast<std::uint32_t*>(v.data()));
}
void H5Dataset::write(std::uint64_t offset, std::span<const std::uint64_t> v) {
  io(true, offset, v.size(), H5T_NATIVE_UINT64, const_cast<std::uint64_t*>(v.data()));
}
void H5Dataset::read(std::uint64_t offset, std::span<std::uint16_t> out) const {
  io(false, offset, out.size(), H5T_NATIVE_UINT16, out.data());
}
void H5Dataset::read(std::uint64_t offset, std::span<std::uint32_t> out) const {
  io(false, offset, out.size(), H5T_NATIVE_UINT32, out.data());
}
void H5Dataset::read(std::uint64_t offset, std::span<std::int32_t> out) const {
  io(false, offset, out.size(), H5T_NATIVE_INT32, out.data());
}
void H5Dataset::read(std::uint64_t offset, std::span<std::uint64_t> out) const {
  io(false, offset, out.size(), H5T_NATIVE_UINT64, out.data());
}

std::optional<std::uint64_t> H5Dataset::checksummed_chunk_elements() const {
  H5Handle dcpl(ZT_H5(H5Dget_create_plist(id()), where_), H5Kind::kPropList);
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return std::nullopt;
  const std::vector<Filter> filters = filters_of(dcpl.get(), where_);
  hsize_t chunk = 0;
  if (filters.size() != 1 || filters[0].id != H5Z_FILTER_FLETCHER32 || ZT_H5(H5Pget_chunk(dcpl.get(), 1, &chunk), where_) != 1)
    return std::nullopt;
  return chunk;
}

std::optional<std::uint64_t> H5Dataset::chunk_file_offset(std::uint64_t first, std::uint64_t stored_bytes,
                                                          std::uint64_t base) const {
  const hsize_t offset = first;
  unsigned filter_mask = 0;
  haddr_t address = HADDR_UNDEF;
  hsize_t size = 0;
  ZT_H5(H5Dget_chunk_info_by_coord(id(), &offset, &filter_mask, &address, &size), where_);
  if (address == HADDR_UNDEF || size != stored_bytes || filter_mask != 0) return std::nullopt;
  return base + address;
}

bool H5Dataset::read_stored_chunk(std::uint64_t first, std::span<std::uint8_t> out) const {
  const hsize_t offset = first;
  hsize_t size = 0;
  ZT_H5(H5Dget_chunk_storage_size(id(), &offset, &size), where_);
  if (size != out.size()) return false;
  std::uint32_t filter_mask = 0;
  ZT_H5(H5Dread_chunk(id(), H5P_DEFAULT, &offset, &filter_mask, out.data()), where_);
  return filter_mask == 0;
}

std::uint64_t H5Dataset::file_base_offset() const {
  H5Handle file(ZT_H5(H5Iget_file_id(id()), where_), H5Kind::kFile);
  H5Handle fcpl(ZT_H5(H5Fget_create_plist(file.get()), where_), H5Kind::kPropList);
  hsize_t user_block = 0;
  ZT_H5(H5Pget_userblock(fcpl.get(), &user_block), where_);
  return user_block;
}

}  // namespace zt::io
