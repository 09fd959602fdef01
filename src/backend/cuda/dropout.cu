// Dropout with a counter-based mask on the GPU (backend.hpp): one element per thread in a grid-stride
// loop; each thread runs Philox4x32-10 at its element's counter (first + row * row_stride + col) (core/rng.cpp's rounds and constants), so
// the mask is the CPU backend's bit for bit. Math in fp32, one rounding on store; out may alias inp
// (each element is read before the same thread writes it).
#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/op_checks.hpp"

namespace zt::backend::cuda {
namespace {

// Word 0 of Philox4x32-10 (Salmon et al. 2011) at counter (k, stream), key seed.
__device__ __forceinline__ std::uint32_t philox_word0(std::uint64_t k, std::uint64_t stream, std::uint64_t seed) {
  std::uint32_t c0 = static_cast<std::uint32_t>(k), c1 = static_cast<std::uint32_t>(k >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(stream), c3 = static_cast<std::uint32_t>(stream >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const std::uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c0;
}

template <typename T>
__global__ void dropout_kernel(T* out, const T* inp, std::int64_t n, std::uint32_t threshold, float keep_scale,
                               std::uint64_t seed, std::uint64_t stream, std::uint64_t first, std::int64_t width,
                               std::int64_t row_stride) {
  for (std::int64_t i = grid_start(); i < n; i += grid_step()) {
    const std::uint64_t k = first + static_cast<std::uint64_t>(i / width * row_stride + i % width);
    const bool keep = philox_word0(k, stream, seed) >= threshold;
    out[i] = from_f32<T>(keep ? to_f32(inp[i]) * keep_scale : 0.0f);
  }
}

}  // namespace

void CudaBackend::dropout(Tensor out, Tensor inp, float p, std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                          std::int64_t row_stride) {
  const char* op = "dropout";
  expect_same_numel(op, out, inp);
  expect_compute(op, "inp", inp, out.dtype);
  const std::uint32_t threshold = dropout_threshold(op, p);
  const std::int64_t n = out.numel(), width = out.rank == 0 ? 1 : out.dim(-1);
  const std::int64_t stride = dropout_row_stride(op, out, row_stride);
  if (n == 0) return;
  dispatch_float(out.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<grid_stride_blocks(n), kBlockThreads, 0, stream_>>>(
        static_cast<T*>(out.data), static_cast<const T*>(inp.data), n, threshold, 1.0f / (1.0f - p), seed, stream, first, width, stride);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::backend::cuda
