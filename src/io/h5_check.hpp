// ZT_H5: the check every HDF5 call in io/ goes through. Private to io/ (includes hdf5.h).
#pragma once

#include <string>

#include <hdf5.h>

#include "core/error.hpp"
#include "io/hdf5.hpp"

namespace zt::io::detail {

// HDF5's own description of the most recent failure (innermost first), from its error stack.
std::string h5_error_stack();
// One HDF5 error description on one line ("file write failed: No space left on device (errno 28)").
std::string one_line_error(std::string desc);

[[noreturn]] void throw_h5_failure(const char* call, const std::string& where);

}  // namespace zt::io::detail

namespace zt::io {
// The little-endian file type of each H5Type.
inline hid_t file_type_of(H5Type t) {
  switch (t) {
    case H5Type::kU8: return H5T_STD_U8LE;
    case H5Type::kU16: return H5T_STD_U16LE;
    case H5Type::kU32: return H5T_STD_U32LE;
    case H5Type::kU64: return H5T_STD_U64LE;
    case H5Type::kI32: return H5T_STD_I32LE;
    case H5Type::kF32: return H5T_IEEE_F32LE;
  }
  return -1;
}
}  // namespace zt::io

// Evaluates an HDF5 call; a negative result throws zt::IoError naming the call, `where` (file and
// object) and HDF5's reason. Yields the call's value otherwise.
#define ZT_H5(call, where)                                                       \
  ([&]() {                                                                       \
    const auto zt_h5_result_ = (call);                                           \
    if (zt_h5_result_ < 0) ::zt::io::detail::throw_h5_failure(#call, (where));  \
    return zt_h5_result_;                                                        \
  }())
