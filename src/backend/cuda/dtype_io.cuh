// Loads and stores of the three floating storage types as fp32 (every kernel computes in fp32 and
// rounds to nearest even on store, as the CPU reference does), and the dispatch from a runtime DType
// to a kernel template.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace zt::backend::cuda {

template <typename T> __device__ __forceinline__ float to_f32(T x);
template <> __device__ __forceinline__ float to_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_f32<__half>(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }

// Calls f(T{}) with T the storage type of a floating DType: dispatch_float(t, op, [&](auto tag) {
// using T = decltype(tag); ... }). Other dtypes throw naming the op.
template <typename F>
void dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::kF32: f(float{}); return;
    case DType::kBF16: f(__nv_bfloat16{}); return;
    case DType::kF16: f(__half{}); return;
    default: throw Error(cat(op, ": unsupported dtype ", dtype_name(t), " (needs f32, bf16 or f16)"));
  }
}

}  // namespace zt::backend::cuda
