// Token + position embedding on the GPU, forward and backward (h0 = wte[token] + wpe[position]).
// Forward: one thread per output element. Backward: dwpe is a fixed-order sum over the batch (one
// thread per (t, c), deterministic); dwte is scattered with fp32 atomicAdd, because rows of the same
// token collide and a race-free order would need a sort by token. Atomic order varies run to run, so
// dwte may differ in the last bits between runs (bitwise GPU determinism is not a goal; the CPU
// backend is the deterministic reference).
#include <math_constants.h>

#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"

namespace zt::backend::cuda {
namespace {

// out[bt, c] = wte[tokens[bt], c] + wpe[bt % T, c]; out, wte, wpe in T_. A token outside wte's rows
// (a data bug the loader should have caught) yields NaN rather than a read out of bounds.
template <typename T>
__global__ void embedding_forward_kernel(T* out, const std::int32_t* tokens, const T* wte, const T* wpe,
                                         std::int64_t BT, std::int64_t T_len, std::int64_t C, std::int64_t Vp) {
  for (std::int64_t i = grid_start(); i < BT * C; i += grid_step()) {
    const std::int64_t bt = i / C, c = i % C;
    const std::int32_t tok = tokens[bt];
    const bool valid = tok >= 0 && tok < Vp;
    out[i] = from_f32<T>(valid ? to_f32(wte[tok * C + c]) + to_f32(wpe[(bt % T_len) * C + c]) : CUDART_NAN_F);
  }
}

// dwte[tokens[bt], c] += dout[bt, c] (atomic: rows of one token collide). dwte f32.
template <typename T>
__global__ void embedding_dwte_kernel(float* dwte, const T* dout, const std::int32_t* tokens, std::int64_t BT,
                                      std::int64_t C, std::int64_t Vp) {
  for (std::int64_t i = grid_start(); i < BT * C; i += grid_step()) {
    const std::int64_t bt = i / C, c = i % C;
    const std::int32_t tok = tokens[bt];
    if (tok >= 0 && tok < Vp) atomicAdd(&dwte[tok * C + c], to_f32(dout[i]));
  }
}

// dwpe[t, c] += sum_b dout[b, t, c], b in order. One thread per (t, c); dwpe f32.
template <typename T>
__global__ void embedding_dwpe_kernel(float* dwpe, const T* dout, std::int64_t B, std::int64_t T_len,
                                      std::int64_t C) {
  for (std::int64_t i = grid_start(); i < T_len * C; i += grid_step()) {
    float sum = 0.0f;
    for (std::int64_t b = 0; b < B; ++b) sum += to_f32(dout[b * T_len * C + i]);
    dwpe[i] += sum;
  }
}

}  // namespace

void CudaBackend::embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe) {
  const char* op = "embedding_forward";
  if (wpe.empty()) not_on_cuda("embedding_forward without a position table");
  check_embedding_shapes(op, out, tokens, wte, wpe);
  expect_dtype(op, "tokens", tokens, DType::kI32);
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(-1);
  expect_compute(op, "wte", wte, out.dtype);
  expect_compute(op, "wpe", wpe, out.dtype);
  if (B * T * C == 0) return;
  dispatch_float(out.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    embedding_forward_kernel<X><<<grid_stride_blocks(B * T * C), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(out.data), static_cast<const std::int32_t*>(tokens.data), static_cast<const X*>(wte.data),
        static_cast<const X*>(wpe.data), B * T, T, C, wte.dim(0));
  });
  ZT_CUDA_LAUNCH_CHECK();
}

void CudaBackend::embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens) {
  const char* op = "embedding_backward";
  if (dwpe.empty()) not_on_cuda("embedding_backward without a position table");
  ZT_CHECK_EQ(tokens.rank, 2, op, ": tokens must be [B,T], got ", tokens.shape_string());
  expect_dtype(op, "tokens", tokens, DType::kI32);
  const std::int64_t B = tokens.dim(0), T = tokens.dim(1), C = dwte.dim(-1);
  expect_shape(op, "dout", dout, {B, T, C});
  ZT_CHECK_EQ(dwte.rank, 2, op, ": dwte must be [Vp,C]");
  ZT_CHECK_EQ(dwpe.dim(-1), C, op, ": dwpe and dwte widths differ");
  ZT_CHECK_LE(T, dwpe.dim(0), op, ": sequence longer than the position table");
  expect_dtype(op, "dwte", dwte, DType::kF32);
  expect_dtype(op, "dwpe", dwpe, DType::kF32);
  if (B * T * C == 0) return;
  dispatch_float(dout.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    const X* d = static_cast<const X*>(dout.data);
    embedding_dwte_kernel<X><<<grid_stride_blocks(B * T * C), kBlockThreads, 0, stream_>>>(
        static_cast<float*>(dwte.data), d, static_cast<const std::int32_t*>(tokens.data), B * T, C, dwte.dim(0));
    ZT_CUDA_LAUNCH_CHECK();
    embedding_dwpe_kernel<X><<<grid_stride_blocks(T * C), kBlockThreads, 0, stream_>>>(
        static_cast<float*>(dwpe.data), d, B, T, C);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::backend::cuda
