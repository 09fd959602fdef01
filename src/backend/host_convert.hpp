// Host copies of backend tensors in any floating dtype, seen as fp32: the model's logits, the ZeRO
// engine's parameter loads and the offload optimizer's working copies go through these so that the
// code above the backend reads and writes floats whatever the compute dtype is.
#pragma once

#include <cstddef>

#include "backend/backend.hpp"

namespace zt::backend {

// n elements of dtype (f32, bf16 or f16) <-> floats, on the host (round to nearest even).
void host_to_f32(const void* src, DType dtype, float* dst, std::size_t n);
void host_from_f32(const float* src, DType dtype, void* dst, std::size_t n);

// dst (host, src.numel() floats) = backend tensor src converted to f32.
void copy_to_host_as_f32(Backend& backend, float* dst, const Tensor& src);
// backend tensor dst = host floats src (dst.numel() of them) converted to dst's dtype.
void copy_from_host_f32(Backend& backend, const Tensor& dst, const float* src);

}  // namespace zt::backend
