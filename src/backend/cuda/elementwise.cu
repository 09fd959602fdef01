// Element-wise ops on the GPU: the residual add, gradient accumulation, scaling and dtype casts, math
// in fp32, rounded to nearest even on store. Add, accumulate and scale run in 16-byte packs
// (vector_map.cuh); casts one element per thread in a grid-stride loop. Each element is read before
// it is written by the same thread, so the aliasing backend.hpp allows is safe.
#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/vector_map.cuh"

namespace zt::backend::cuda {
namespace {

// out = a + b (also dst += src, as dst = dst + src)
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// x *= factor
struct Scaled {
  float factor;
  __device__ float operator()(float x) const { return x * factor; }
};

// dst f32 += src (bf16/f16) widened: a reduced gradient slice in the compute dtype added to the fp32 shard
template <typename TS>
__global__ void accumulate_widened_kernel(float* dst, const TS* src, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_step()) dst[i] += to_f32(src[i]);
}

// dst = src converted through fp32 (exact for every source type, so one rounding on store)
template <typename TD, typename TS>
__global__ void cast_kernel(TD* dst, const TS* src, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_step())
    dst[i] = from_f32<TD>(to_f32(src[i]));
}

}  // namespace

void CudaBackend::add(Tensor out, Tensor a, Tensor b) {
  const char* op = "add";
  expect_same_numel(op, out, a);
  expect_same_numel(op, out, b);
  expect_compute(op, "a", a, out.dtype);
  expect_compute(op, "b", b, out.dtype);
  const std::int64_t n = out.numel();
  if (n == 0) return;
  dispatch_float(out.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    launch_map<T, 2>(stream_, static_cast<T*>(out.data), {static_cast<const T*>(a.data), static_cast<const T*>(b.data)},
                     n, Sum{});
  });
  ZT_CUDA_LAUNCH_CHECK();
}

void CudaBackend::accumulate(Tensor dst, Tensor src) {
  const char* op = "accumulate";
  expect_same_numel(op, dst, src);
  const std::int64_t n = dst.numel();
  if (n == 0) return;
  if (dst.dtype == DType::kF32 && src.dtype != DType::kF32) {
    dispatch_float(src.dtype, op, [&](auto tag) {
      using TS = decltype(tag);
      accumulate_widened_kernel<TS><<<grid_stride_blocks(n), kBlockThreads, 0, stream_>>>(
          static_cast<float*>(dst.data), static_cast<const TS*>(src.data), n);
    });
    ZT_CUDA_LAUNCH_CHECK();
    return;
  }
  expect_compute(op, "src", src, dst.dtype);
  dispatch_float(dst.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    launch_map<T, 2>(stream_, static_cast<T*>(dst.data), {static_cast<const T*>(dst.data), static_cast<const T*>(src.data)},
                     n, Sum{});
  });
  ZT_CUDA_LAUNCH_CHECK();
}

void CudaBackend::scale(Tensor x, float factor) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  dispatch_float(x.dtype, "scale", [&](auto tag) {
    using T = decltype(tag);
    launch_map<T, 1>(stream_, static_cast<T*>(x.data), {static_cast<const T*>(x.data)}, n, Scaled{factor});
  });
  ZT_CUDA_LAUNCH_CHECK();
}

// Any direction between f32, bf16 and f16; same dtype is a copy.
void CudaBackend::cast(Tensor dst, Tensor src) {
  const char* op = "cast";
  expect_same_numel(op, dst, src);
  const std::int64_t n = src.numel();
  if (src.dtype == dst.dtype && is_float(src.dtype)) return copy(dst.data, src.data, src.bytes());
  if (n == 0) return;
  dispatch_float(dst.dtype, op, [&](auto dst_tag) {
    dispatch_float(src.dtype, op, [&](auto src_tag) {
      using TD = decltype(dst_tag);
      using TS = decltype(src_tag);
      cast_kernel<TD, TS><<<grid_stride_blocks(n), kBlockThreads, 0, stream_>>>(static_cast<TD*>(dst.data),
                                                                              static_cast<const TS*>(src.data), n);
    });
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::backend::cuda
