// HDF5 wrappers: handles, attributes, 1-D datasets, deterministic file creation.
#include "io/hdf5.hpp"

#include <algorithm>
#include <type_traits>

#include "io/h5_check.hpp"

namespace zt::io {

static_assert(std::is_same_v<H5Id, hid_t>, "H5Id must be hid_t");

namespace {
// HDF5 closes what is still open from an atexit handler; after an H5Fclose that failed (a full disk
// while the file's metadata is flushed) that handler dereferences the half-closed file and the
// process dies with SIGSEGV instead of its exit code. Every handle here is closed by its owner, so
// the handler has nothing to do: it is not installed (H5dont_atexit must precede any other call,
// hence a static initializer).
[[maybe_unused]] const bool kHdf5AtexitDisabled = H5dont_atexit() >= 0;
}  // namespace

namespace detail {

// One HDF5 error description on one line: a system call's failure, which HDF5 writes as "file write
// failed: time = ...\n, filename = ..., errno = 28, error message = 'No space left on device', buf = ...",
// as "file write failed: No space left on device (errno 28)"; any other with its line breaks as blanks.
std::string one_line_error(std::string desc) {
  const std::size_t message = desc.find("error message = '");
  const std::size_t number = desc.find("errno = ");
  if (message != std::string::npos && number != std::string::npos) {
    const std::size_t from = message + 17, to = desc.find('\'', from);
    const std::string what = desc.substr(from, to == std::string::npos ? std::string::npos : to - from);
    const std::string code = desc.substr(number + 8, desc.find_first_not_of("0123456789", number + 8) - (number + 8));
    const std::size_t head = desc.find(": time = ");
    return cat(head == std::string::npos ? std::string() : desc.substr(0, head) + ": ", what, " (errno ", code, ")");
  }
  for (char& c : desc)
    if (c == '\n' || c == '\r') c = ' ';
  return desc;
}

std::string h5_error_stack() {
  std::string text;
  auto walk = [](unsigned n, const H5E_error2_t* e, void* data) -> herr_t {
    auto* out = static_cast<std::string*>(data);
    if (n < 3 && e->desc != nullptr) *out += cat(n ? "; " : "", one_line_error(e->desc), " (", e->func_name, ")");
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? "no detail from HDF5" : text;
}

void throw_h5_failure(const char* call, const std::string& where) {
  throw IoError(cat("HDF5 failed on ", where, ": ", h5_error_stack(), " [", call, "]"));
}

}  // namespace detail

namespace {

// Fixed-length UTF-8 strings of `size` bytes (NUL-padded). Not variable-length: those live in the
// global heap, which carries no checksum, and a damaged heap makes HDF5 read out of bounds. Fixed
// strings sit inside the (checksummed) object header.
H5Handle string_type(std::size_t size, const std::string& where) {
  H5Handle t(ZT_H5(H5Tcopy(H5T_C_S1), where), H5Kind::kDatatype);
  ZT_H5(H5Tset_size(t.get(), std::max<std::size_t>(size, 1)), where);
  ZT_H5(H5Tset_strpad(t.get(), H5T_STR_NULLPAD), where);
  ZT_H5(H5Tset_cset(t.get(), H5T_CSET_UTF8), where);
  return t;
}

// Writes a string attribute: one string (scalar) or a 1-D array, fixed length = the longest.
void write_strings(hid_t object, const std::string& w, const std::string& name, const std::vector<std::string>& values,
                   bool scalar) {
  std::size_t size = 1;
  for (const std::string& v : values) size = std::max(size, v.size());
  H5Handle type = string_type(size, w);
  const hsize_t n = values.size();
  H5Handle space(ZT_H5(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr), w), H5Kind::kDataspace);
  H5Handle attr(ZT_H5(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), w),
                H5Kind::kAttribute);
  std::string buffer(values.size() * size, '\0');
  for (std::size_t i = 0; i < values.size(); ++i) buffer.replace(i * size, values[i].size(), values[i]);
  if (n > 0) ZT_H5(H5Awrite(attr.get(), type.get(), buffer.data()), w);
}

// Reads a string attribute's element(s), variable- or fixed-length, as std::strings.
std::vector<std::string> read_strings(hid_t attr, const std::string& where) {
  H5Handle type(ZT_H5(H5Aget_type(attr), where), H5Kind::kDatatype);
  H5Handle space(ZT_H5(H5Aget_space(attr), where), H5Kind::kDataspace);
  if (H5Tget_class(type.get()) != H5T_STRING) throw IoError(cat(where, " is not a string attribute"));
  const auto n = static_cast<std::size_t>(ZT_H5(H5Sget_simple_extent_npoints(space.get()), where));
  std::vector<std::string> out;
  if (n == 0) return out;
  if (ZT_H5(H5Tis_variable_str(type.get()), where) > 0) {  // written by other tools (h5py's default)
    H5Handle mem(ZT_H5(H5Tcopy(H5T_C_S1), where), H5Kind::kDatatype);
    ZT_H5(H5Tset_size(mem.get(), H5T_VARIABLE), where);
    ZT_H5(H5Tset_cset(mem.get(), H5Tget_cset(type.get())), where);  // h5py writes UTF-8: no conversion to ASCII
    std::vector<char*> ptrs(n, nullptr);
    ZT_H5(H5Aread(attr, mem.get(), ptrs.data()), where);
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    const std::size_t size = H5Tget_size(type.get());  // 0 on failure
    if (size == 0) detail::throw_h5_failure("H5Tget_size", where);
    std::string buffer(n * size, '\0');
    ZT_H5(H5Aread(attr, type.get(), buffer.data()), where);
    for (std::size_t i = 0; i < n; ++i) {
      std::string s = buffer.substr(i * size, size);
      out.push_back(s.substr(0, s.find('\0')));
    }
  }
  return out;
}

}  // namespace

H5Handle& H5Handle::operator=(H5Handle&& o) noexcept {
  if (this != &o) {
    release();
    id_ = o.id_;
    kind_ = o.kind_;
    o.id_ = -1;
  }
  return *this;
}

void H5Handle::release() noexcept {
  if (id_ < 0) return;
  switch (kind_) {
    case H5Kind::kFile: H5Fclose(id_); break;
    case H5Kind::kGroup: H5Gclose(id_); break;
    case H5Kind::kDataset: H5Dclose(id_); break;
    case H5Kind::kAttribute: H5Aclose(id_); break;
    case H5Kind::kDataspace: H5Sclose(id_); break;
    case H5Kind::kDatatype: H5Tclose(id_); break;
    case H5Kind::kPropList: H5Pclose(id_); break;
  }
  id_ = -1;
}

void H5Handle::close(const std::string& where) {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = -1;
  if (kind_ == H5Kind::kFile) ZT_H5(H5Fclose(id), where);
  else H5Handle(id, kind_).release();
}

bool hdf5_is_threadsafe() {
  hbool_t safe = 0;
  return H5is_library_threadsafe(&safe) >= 0 && safe;
}

void silence_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }  // per thread

// --- attributes -------------------------------------------------------------------------------------

bool H5Object::has_attr(const std::string& name) const {
  return ZT_H5(H5Aexists(id(), name.c_str()), where_ + " attribute " + name) > 0;
}

void H5Object::set_attr(const std::string& name, const std::string& value) {
  write_strings(id(), where_ + " attribute " + name, name, {value}, true);
}

void H5Object::set_attr(const std::string& name, std::uint64_t value) {
  const std::string w = where_ + " attribute " + name;
  H5Handle space(ZT_H5(H5Screate(H5S_SCALAR), w), H5Kind::kDataspace);
  H5Handle attr(ZT_H5(H5Acreate2(id(), name.c_str(), H5T_STD_U64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), w),
                H5Kind::kAttribute);
  ZT_H5(H5Awrite(attr.get(), H5T_NATIVE_UINT64, &value), w);
}

void H5Object::set_attr(const std::string& name, const std::vector<std::string>& values) {
  write_strings(id(), where_ + " attribute " + name, name, values, false);
}

std::string H5Object::attr_string(const std::string& name) const {
  const std::string w = where_ + " attribute " + name;
  H5Handle attr(ZT_H5(H5Aopen(id(), name.c_str(), H5P_DEFAULT), w), H5Kind::kAttribute);
  std::vector<std::string> v = read_strings(attr.get(), w);
  if (v.size() != 1) throw IoError(cat(w, " holds ", v.size(), " strings, expected one"));
  return v[0];
}

std::vector<std::string> H5Object::attr_strings(const std::string& name) const {
  const std::string w = where_ + " attribute " + name;
  H5Handle attr(ZT_H5(H5Aopen(id(), name.c_str(), H5P_DEFAULT), w), H5Kind::kAttribute);
  return read_strings(attr.get(), w);
}

std::uint64_t H5Object::attr_u64(const std::string& name) const {
  const std::string w = where_ + " attribute " + name;
  H5Handle attr(ZT_H5(H5Aopen(id(), name.c_str(), H5P_DEFAULT), w), H5Kind::kAttribute);
  H5Handle type(ZT_H5(H5Aget_type(attr.get()), w), H5Kind::kDatatype);
  H5Handle space(ZT_H5(H5Aget_space(attr.get()), w), H5Kind::kDataspace);
  if (H5Tget_class(type.get()) != H5T_INTEGER || ZT_H5(H5Sget_simple_extent_npoints(space.get()), w) != 1)
    throw IoError(cat(w, " is not a single integer"));
  if (H5Tget_sign(type.get()) == H5T_SGN_2) {  // HDF5 would convert a negative value to 0
    std::int64_t signed_value = 0;
    ZT_H5(H5Aread(attr.get(), H5T_NATIVE_INT64, &signed_value), w);
    if (signed_value < 0) throw IoError(cat(w, " is ", signed_value, ": negative"));
    return static_cast<std::uint64_t>(signed_value);
  }
  std::uint64_t value = 0;
  ZT_H5(H5Aread(attr.get(), H5T_NATIVE_UINT64, &value), w);
  return value;
}

}  // namespace zt::io
