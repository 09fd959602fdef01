// NF4 dequantization on the GPU (backend.hpp): one thread per code byte (the two elements it packs) in a
// grid-stride loop, so a warp reads 32 consecutive bytes and writes 64 consecutive outputs (coalesced).
// The 16 levels come from the host's table (quant::nf4_levels(), the CPU twin's) as a kernel argument and
// are staged in shared memory: a warp's threads index it with different codes, which constant memory
// would serialise. The product level * scale is one fp32 multiply (nothing to contract into an FMA),
// rounded once on store as the CPU backend rounds: the same bits on both. Double quantization's scales
// (dequantize_blockwise8): one thread per 8-bit code, the 256-entry map staged in shared memory the same
// way, the product and the offset's sum rounded separately (__fmul_rn, __fadd_rn: never fused into an FMA).
#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/op_checks.hpp"
#include "quant/nf4.hpp"

namespace zt::backend::cuda {
namespace {

struct Nf4Levels {
  float v[16];
};
struct DynamicMap {  // 1 KiB: within a kernel's 4 KiB of arguments
  float v[256];
};

// out[2j] = levels[codes[j] >> 4] * absmax[2j >> shift], out[2j+1] = levels[codes[j] & 15] * absmax[(2j+1) >> shift]
// (the last byte of an odd n writes its high nibble only). n_bytes = (n + 1) / 2.
template <typename T>
__global__ void dequantize_nf4_kernel(T* out, const std::uint8_t* codes, const float* absmax, std::int64_t n,
                                      std::int64_t n_bytes, int shift, Nf4Levels table) {
  __shared__ float levels[16];
  if (threadIdx.x < 16) levels[threadIdx.x] = table.v[threadIdx.x];
  __syncthreads();
  for (std::int64_t j = grid_start(); j < n_bytes; j += grid_step()) {
    const std::uint8_t byte = codes[j];
    const std::int64_t i = 2 * j;
    out[i] = from_f32<T>(levels[byte >> 4] * absmax[i >> shift]);
    if (i + 1 < n) out[i + 1] = from_f32<T>(levels[byte & 0xF] * absmax[(i + 1) >> shift]);
  }
}

// out[i] = map[codes[i]] * absmax[i >> shift] + offset, rounded after the product and after the sum.
__global__ void dequantize_blockwise8_kernel(float* out, const std::uint8_t* codes, const float* absmax, std::int64_t n,
                                             int shift, float offset, DynamicMap table) {
  __shared__ float map[256];
  for (int k = threadIdx.x; k < 256; k += blockDim.x) map[k] = table.v[k];
  __syncthreads();
  for (std::int64_t i = grid_start(); i < n; i += grid_step())
    out[i] = __fadd_rn(__fmul_rn(map[codes[i]], absmax[i >> shift]), offset);
}

}  // namespace

void CudaBackend::dequantize_nf4(Tensor out, Tensor codes, Tensor absmax, int block) {
  const char* op = "dequantize_nf4";
  const int shift = check_blockwise_shapes(op, out, codes, absmax, block, 2);
  const std::int64_t n = out.numel(), n_bytes = (n + 1) / 2;
  if (n == 0) return;
  Nf4Levels table;
  for (int k = 0; k < 16; ++k) table.v[k] = quant::nf4_levels()[k];
  dispatch_float(out.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    static_assert(kBlockThreads >= 16, "the first 16 threads stage the level table");
    dequantize_nf4_kernel<T><<<grid_stride_blocks(n_bytes), kBlockThreads, 0, stream_>>>(
        static_cast<T*>(out.data), static_cast<const std::uint8_t*>(codes.data), static_cast<const float*>(absmax.data),
        n, n_bytes, shift, table);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

void CudaBackend::dequantize_blockwise8(Tensor out, Tensor codes, Tensor absmax, int block, float offset) {
  const char* op = "dequantize_blockwise8";
  const int shift = check_blockwise_shapes(op, out, codes, absmax, block, 1);
  const std::int64_t n = out.numel();
  if (n == 0) return;
  DynamicMap table;
  for (int k = 0; k < 256; ++k) table.v[k] = quant::dynamic_map()[k];
  dequantize_blockwise8_kernel<<<grid_stride_blocks(n), kBlockThreads, 0, stream_>>>(
      static_cast<float*>(out.data), static_cast<const std::uint8_t*>(codes.data), static_cast<const float*>(absmax.data),
      n, shift, offset, table);
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::backend::cuda
