// Token (+ position) embedding on the GPU, forward and backward (GPT-2: h0 = wte[token] + wpe[position];
// Llama: no position table, h0 = wte[token]). Forward: one thread per output element. Backward, both
// deterministic (the same bits on every run, and the CPU twin's bits: the same fp32 additions in the
// same order): dwpe adds the batch in order, one thread per (t, c); for dwte, whose rows of one token
// collide, a stable radix sort of (token, row) pairs (CUB) groups each token's rows in row order, then
// one block per token adds them into dwte in that order, with no atomics. A very frequent token makes
// its block long (its rows are added one after another), the price of the fixed order.
#include <math_constants.h>

#include <cub/device/device_radix_sort.cuh>
#include <limits>

#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"

namespace zt::backend::cuda {
namespace {

// out[bt, c] = wte[tokens[bt], c] + wpe[bt % T, c] (wpe null: the wte row copied exactly, as the CPU);
// out, wte, wpe in T_. A token outside wte's rows (a data bug the loader should have caught) yields NaN
// rather than a read out of bounds; kTokenInOtherRows (a row another piece of the table holds, no wpe)
// leaves the output row as it is.
// With pos (generation), wpe's row pos[bt] instead of bt % T (-1: row 0).
template <typename T>
__global__ void embedding_forward_kernel(T* out, const std::int32_t* tokens, const T* wte, const T* wpe,
                                         const std::int32_t* pos, std::int64_t BT, std::int64_t T_len, std::int64_t C,
                                         std::int64_t Vp) {
  for (std::int64_t i = grid_start(); i < BT * C; i += grid_step()) {
    const std::int64_t bt = i / C, c = i % C;
    const std::int32_t tok = tokens[bt];
    if (tok == kTokenInOtherRows && wpe == nullptr) continue;
    const bool valid = tok >= 0 && tok < Vp;
    const float e = valid ? to_f32(wte[tok * C + c]) : CUDART_NAN_F;
    const std::int64_t t = pos != nullptr ? max(pos[bt], 0) : bt % T_len;
    out[i] = from_f32<T>(wpe == nullptr ? e : e + to_f32(wpe[t * C + c]));
  }
}

__global__ void iota_kernel(std::int32_t* rows, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_step()) rows[i] = static_cast<std::int32_t>(i);
}

// After the stable sort: tok[i] the i-th smallest token (or position), row[i] its row (rows of one token
// ascending). Block i starts a run when tok[i] differs from tok[i-1] and then owns that token's dwte row:
//   dwte[tok, c] = (((dwte[tok, c] + dout[r0, c]) + dout[r1, c]) + ...), rows in order (the CPU's order).
// Other blocks leave at once; tokens outside wte's rows (NaN in forward, or kTokenInOtherRows) add
// nothing. dwte f32.
template <typename T>
__global__ void embedding_dwte_runs_kernel(float* dwte, const T* dout, const std::int32_t* tok,
                                           const std::int32_t* row, std::int64_t n, std::int64_t C, std::int64_t Vp) {
  const std::int64_t i = blockIdx.x;
  const std::int32_t t = tok[i];
  if ((i > 0 && tok[i - 1] == t) || t < 0 || t >= Vp) return;
  std::int64_t end = i + 1;
  while (end < n && tok[end] == t) ++end;
  for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = dwte[t * C + c];
    for (std::int64_t j = i; j < end; ++j) acc += to_f32(dout[static_cast<std::int64_t>(row[j]) * C + c]);
    dwte[t * C + c] = acc;
  }
}

// dwpe[t, c] = ((dwpe[t, c] + dout[0, t, c]) + dout[1, t, c]) + ..., b in order (the CPU's order).
// One thread per (t, c); dwpe f32.
template <typename T>
__global__ void embedding_dwpe_kernel(float* dwpe, const T* dout, std::int64_t B, std::int64_t T_len,
                                      std::int64_t C) {
  for (std::int64_t i = grid_start(); i < T_len * C; i += grid_step()) {
    float acc = dwpe[i];
    for (std::int64_t b = 0; b < B; ++b) acc += to_f32(dout[b * T_len * C + i]);
    dwpe[i] = acc;
  }
}

}  // namespace

void CudaBackend::embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, Tensor positions) {
  const char* op = "embedding_forward";
  check_embedding_shapes(op, out, tokens, wte, wpe, !positions.empty());
  expect_dtype(op, "tokens", tokens, DType::kI32);
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(-1);
  expect_compute(op, "wte", wte, out.dtype);
  if (!wpe.empty()) expect_compute(op, "wpe", wpe, out.dtype);
  if (B * T * C == 0) return;
  dispatch_float(out.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    embedding_forward_kernel<X><<<grid_stride_blocks(B * T * C), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(out.data), static_cast<const std::int32_t*>(tokens.data), static_cast<const X*>(wte.data),
        wpe.empty() ? nullptr : static_cast<const X*>(wpe.data),
        wpe.empty() ? nullptr : check_positions(op, positions, B, T, 0, false), B * T, T, C, wte.dim(0));
  });
  ZT_CUDA_LAUNCH_CHECK();
}

// Bytes of n int32 rounded up to 256, so the parts carved from one scratch buffer stay aligned for CUB.
static std::size_t int_array_bytes(std::int64_t n) {
  return (static_cast<std::size_t>(n) * sizeof(std::int32_t) + 255) / 256 * 256;
}

// dst[key[r], :] += d[r, :] for the n rows r in row order (keys outside [0, n_keys) add nothing): the
// stable sort of (key, row), then one block per run of a key.
template <typename X>
static void scatter_rows_sorted(CudaBackend& be, const char* op, float* dst, const X* d, const std::int32_t* keys,
                                std::int64_t n, std::int64_t n_keys, std::int64_t C, cudaStream_t stream) {
  ZT_CHECK_LE(n, std::numeric_limits<std::int32_t>::max(), op, ": ", n, " rows exceed the sort's int32 row ids");
  // Scratch: rows (0..n-1), sorted keys, sorted rows, then CUB's temporary storage.
  const std::size_t ints = int_array_bytes(n);
  std::size_t cub_bytes = 0;
  ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, keys, static_cast<std::int32_t*>(nullptr),
                                                static_cast<const std::int32_t*>(nullptr),
                                                static_cast<std::int32_t*>(nullptr), n, 0, 32, stream));
  Buffer scratch = be.allocate(3 * ints + cub_bytes);
  unsigned char* base = static_cast<unsigned char*>(scratch.data());
  auto* rows = reinterpret_cast<std::int32_t*>(base);
  auto* sorted_keys = reinterpret_cast<std::int32_t*>(base + ints);
  auto* sorted_rows = reinterpret_cast<std::int32_t*>(base + 2 * ints);
  void* cub_temp = base + 3 * ints;
  iota_kernel<<<grid_stride_blocks(n), kBlockThreads, 0, stream>>>(rows, n);
  ZT_CUDA_LAUNCH_CHECK();
  // All 32 bits: LSD radix sort is stable, so each key's rows stay in ascending order.
  ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(cub_temp, cub_bytes, keys, sorted_keys, rows, sorted_rows, n, 0, 32,
                                                stream));
  embedding_dwte_runs_kernel<X><<<static_cast<unsigned>(n), kBlockThreads, 0, stream>>>(dst, d, sorted_keys,
                                                                                        sorted_rows, n, C, n_keys);
  ZT_CUDA_LAUNCH_CHECK();
}

void CudaBackend::embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens, Tensor positions) {
  const char* op = "embedding_backward";
  ZT_CHECK_EQ(tokens.rank, 2, op, ": tokens must be [B,T], got ", tokens.shape_string());
  expect_dtype(op, "tokens", tokens, DType::kI32);
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), C = dwte.dim(-1), n = B * T;
  expect_shape(op, "dout", dout, {B, T, C});
  ZT_CHECK_EQ(dwte.rank, 2, op, ": dwte must be [Vp,C]");
  expect_dtype(op, "dwte", dwte, DType::kF32);
  const std::int32_t* pos = nullptr;
  if (!dwpe.empty()) {
    ZT_CHECK_EQ(dwpe.dim(-1), C, op, ": dwpe and dwte widths differ");
    pos = check_positions(op, positions, B, T, 0, false);
    if (pos == nullptr) ZT_CHECK_LE(T, dwpe.dim(0), op, ": sequence longer than the position table");
    expect_dtype(op, "dwpe", dwpe, DType::kF32);
  }
  if (n * C == 0) return;
  dispatch_float(dout.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    const X* d = static_cast<const X*>(dout.data);
    scatter_rows_sorted<X>(*this, op, static_cast<float*>(dwte.data), d, static_cast<const std::int32_t*>(tokens.data),
                           n, dwte.dim(0), C, stream_);
    if (dwpe.empty()) return;
    if (pos != nullptr) {
      scatter_rows_sorted<X>(*this, op, static_cast<float*>(dwpe.data), d, pos, n, dwpe.dim(0), C, stream_);
      return;
    }
    embedding_dwpe_kernel<X><<<grid_stride_blocks(T * C), kBlockThreads, 0, stream_>>>(
        static_cast<float*>(dwpe.data), d, B, T, C);
    ZT_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace zt::backend::cuda
