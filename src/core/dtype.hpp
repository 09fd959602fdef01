// Element types of tensors and buffers, with their sizes and names (for errors and file formats).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zt {

// kU8: bytes of packed codes (NF4, two 4-bit codes a byte), read by dequantize_nf4 only.
enum class DType : std::uint8_t { kF32, kBF16, kF16, kI32, kU16, kU32, kU8 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: case DType::kU32: return 4;
    case DType::kBF16: case DType::kF16: case DType::kU16: return 2;
    case DType::kU8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI32: return "i32";
    case DType::kU16: return "u16";
    case DType::kU32: return "u32";
    case DType::kU8: return "u8";
  }
  return "?";
}

}  // namespace zt
