// Host-side dtype conversion around backend copies (host_convert.hpp).
#include "backend/host_convert.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/half.hpp"

namespace zt::backend {

void host_to_f32(const void* src, DType dtype, float* dst, std::size_t n) {
  const auto* h = static_cast<const std::uint16_t*>(src);
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kBF16: for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]); return;
    case DType::kF16: for (std::size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]); return;
    default: throw Error(cat("host_to_f32: unsupported dtype ", dtype_name(dtype)));
  }
}

void host_from_f32(const float* src, DType dtype, void* dst, std::size_t n) {
  auto* h = static_cast<std::uint16_t*>(dst);
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kBF16: for (std::size_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]); return;
    case DType::kF16: for (std::size_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]); return;
    default: throw Error(cat("host_from_f32: unsupported dtype ", dtype_name(dtype)));
  }
}

void copy_to_host_as_f32(Backend& backend, float* dst, const Tensor& src) {
  if (src.dtype == DType::kF32) return backend.copy_to_host(dst, src.data, src.bytes());
  std::vector<std::byte> raw(src.bytes());
  backend.copy_to_host(raw.data(), src.data, src.bytes());
  host_to_f32(raw.data(), src.dtype, dst, static_cast<std::size_t>(src.numel()));
}

void copy_from_host_f32(Backend& backend, const Tensor& dst, const float* src) {
  if (dst.dtype == DType::kF32) return backend.copy_from_host(dst.data, src, dst.bytes());
  std::vector<std::byte> raw(dst.bytes());
  host_from_f32(src, dst.dtype, raw.data(), static_cast<std::size_t>(dst.numel()));
  backend.copy_from_host(dst.data, raw.data(), dst.bytes());
}

}  // namespace zt::backend
