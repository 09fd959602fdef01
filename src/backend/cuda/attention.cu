// Causal multi-head flash attention on the GPU (attention.hpp): shape and dtype checks, the choice of
// kernel flavour (tensor cores for bf16/f16, CUDA cores for f32) and head-size step, and the launches.
// Kernels: attention_kernels.cuh; tiles and warp products: attention_tiles.cuh.
//
// Grouped-query attention (NKV K/V heads shared by NH/NKV query heads each) runs in the same kernels:
// forward and dQ index the K/V head of their query head; the dK/dV kernel runs one block per K/V head
// and key tile and sums its query group in head order.
//
// Backward is deterministic: dK/dV come from a kernel parallel over key tiles and dQ from a second
// kernel parallel over query tiles, each output written once by one warp in a fixed order (no atomics;
// S and dP are computed twice, ~1.4x the matmul work of an atomic dQ). The only scratch is
// D = rowsum(dO * O): B*NH*T floats.
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/op_checks.hpp"
#include "backend/cuda/attention.hpp"
#include "backend/cuda/attention_kernels.cuh"
#include "backend/cuda/check.hpp"

namespace zt::backend::cuda {
namespace {

using attn::Args;

struct Shape {
  std::int64_t B, T, C, W;  // W: the qkv row width, C + 2 NKV hs
  int NH, NKV, hs;
};

Shape check_attention(const char* op, const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head) {
  ZT_CHECK_EQ(out.rank, 3, op, ": out must be [B,T,C], got ", out.shape_string());
  ZT_CHECK_GT(n_head, 0, op, ": n_head must be positive");
  ZT_CHECK_EQ(out.dim(2) % n_head, 0, op, ": C=", out.dim(2), " is not divisible by n_head=", n_head);
  const std::int64_t hs = out.dim(2) / n_head;
  // hs = 0 (C = 0) would pass the multiple-of-8 test and give scale = 1/sqrt(0): NaN lse.
  if (hs <= 0 || hs % 8 != 0 || hs > attn::kMaxHeadSize)
    throw Error(cat(op, ": head size hs=C/n_head=", out.dim(2), "/", n_head, "=", hs,
                    " is not supported (needs a positive multiple of 8 up to ", attn::kMaxHeadSize, ")"));
  const AttentionDims d = check_attention_shapes(op, qkv, out, lse, n_head);
  if (out.dtype != qkv.dtype)
    throw Error(cat(op, ": out is ", dtype_name(out.dtype), " but qkv is ", dtype_name(qkv.dtype),
                    " (activations share one dtype)"));
  if (lse.dtype != DType::kF32) throw Error(cat(op, ": lse must be f32, got ", dtype_name(lse.dtype)));
  // Grids: b*NH on x (2^31 - 1), blocks of 64 or more rows on y (65535); row offsets in int are W-wide.
  ZT_CHECK(d.T <= 65535LL * attn::kTile && d.W <= INT_MAX && d.B * n_head <= INT_MAX, op, ": shape ",
           qkv.shape_string(), " with n_head=", n_head, " exceeds the kernels' grid limits");
  return {d.B, d.T, d.C, d.W, n_head, d.n_kv_head, static_cast<int>(hs)};
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <typename T>
Args<T> make_args(const Shape& s) {
  Args<T> a{};
  a.B = static_cast<int>(s.B), a.T_ = static_cast<int>(s.T), a.C = static_cast<int>(s.C);
  a.NH = s.NH, a.hs = s.hs;
  a.NKV = s.NKV, a.W = static_cast<int>(s.W);
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.hs));
  return a;
}

// Calls f(M{}) with the warp tile flavour for storage type T and the head-size step of hs.
template <typename T, typename F>
void dispatch_tile(int hs, F&& f) {
  auto pick = [&](auto hsp_tag) {
    constexpr int kHsp = decltype(hsp_tag)::value;
    if constexpr (std::is_same_v<T, float>)
      f(attn::SimtTile<kHsp>{});
    else
      f(attn::WmmaTile<T, kHsp>{});
  };
  switch (attn::padded_head_size(hs)) {
    case 16: pick(std::integral_constant<int, 16>{}); return;
    case 32: pick(std::integral_constant<int, 32>{}); return;
    case 64: pick(std::integral_constant<int, 64>{}); return;
    default: pick(std::integral_constant<int, 128>{}); return;
  }
}

// One kernel launch with Blocking G: grid (B*heads, blocks of G::kRows rows) (heads: NH for forward and
// dQ, NKV for dK/dV), opting into more than 48 KB of dynamic shared memory (H100 allows up to 227 KiB a
// block; the largest here is 166.5 KiB, f32 dK/dV at hs 128).
template <typename G, typename Kernel, typename A>
void launch_blocks(Kernel kernel, std::size_t smem_bytes, const Shape& s, int heads, const A& args,
                   cudaStream_t stream) {
  ZT_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)));
  const dim3 grid(static_cast<unsigned>(s.B * heads), static_cast<unsigned>((s.T + G::kRows - 1) / G::kRows));
  kernel<<<grid, G::kThreads, smem_bytes, stream>>>(args);
  ZT_CUDA_LAUNCH_CHECK();
}

template <typename M>
void launch_forward(const Shape& s, const Args<typename M::Elem>& a, cudaStream_t stream) {
  using G = attn::ForwardBlocking<M>;
  launch_blocks<G>(attn::attention_forward_kernel<M, G>, attn::ForwardSmem<M, G>::kBytes, s, s.NH, a, stream);
}
template <typename M>
void launch_backward(const Shape& s, const Args<typename M::Elem>& a, cudaStream_t stream) {
  using Gkv = attn::DkdvBlocking<M>;
  using Gq = attn::DqBlocking<M>;
  launch_blocks<Gkv>(attn::attention_backward_dkdv_kernel<M, Gkv>, attn::DkdvSmem<M, Gkv>::kBytes, s, s.NKV, a,
                     stream);
  launch_blocks<Gq>(attn::attention_backward_dq_kernel<M, Gq>, attn::DqSmem<M, Gq>::kBytes, s, s.NH, a, stream);
}

// The largest block (sm_90: 227 KiB of opt-in shared memory a block).
static_assert(attn::DkdvSmem<attn::SimtTile<128>, attn::DkdvBlocking<attn::SimtTile<128>>>::kBytes <= 227 * 1024,
              "f32 hs 128 dK/dV tiles fit an H100 block");
static_assert(attn::ForwardSmem<attn::SimtTile<128>, attn::ForwardBlocking<attn::SimtTile<128>>>::kBytes <=
                  227 * 1024,
              "f32 hs 128 forward tiles fit an H100 block");

}  // namespace

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head, cudaStream_t stream,
                       const Tensor& segment_starts) {
  const char* op = "attention_forward";
  const Shape s = check_attention(op, qkv, out, lse, n_head);
  const std::int32_t* starts = check_segment_starts(op, segment_starts, s.B, s.T, false);
  if (s.B == 0 || s.T == 0) return;
  dispatch_float(qkv.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    Args<T> a = make_args<T>(s);
    a.qkv = static_cast<const T*>(qkv.data);
    a.o = static_cast<T*>(out.data);
    a.lse = static_cast<float*>(lse.data);
    a.starts = starts;
    a.vec = aligned16(a.qkv);  // hs % 8 == 0, so W = C + 2 NKV hs is a whole number of 16-byte vectors too
    dispatch_tile<T>(s.hs, [&](auto tile) {
      using M = decltype(tile);
      launch_forward<M>(s, a, stream);
    });
  });
}

std::size_t attention_backward_scratch_bytes(std::int64_t B, std::int64_t T, std::int64_t C, int n_head) {
  (void)C;
  return static_cast<std::size_t>(B) * static_cast<std::size_t>(n_head) * static_cast<std::size_t>(T) * sizeof(float);
}

void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse,
                        int n_head, void* scratch, std::size_t scratch_bytes, cudaStream_t stream,
                        const Tensor& segment_starts) {
  const char* op = "attention_backward";
  const Shape s = check_attention(op, qkv, out, lse, n_head);
  const std::int32_t* starts = check_segment_starts(op, segment_starts, s.B, s.T, false);
  expect_shape(op, "dqkv", dqkv, {s.B, s.T, s.W});
  expect_shape(op, "dout", dout, {s.B, s.T, s.C});
  if (dqkv.dtype != qkv.dtype || dout.dtype != qkv.dtype)
    throw Error(cat(op, ": dqkv is ", dtype_name(dqkv.dtype), " and dout ", dtype_name(dout.dtype), " but qkv is ",
                    dtype_name(qkv.dtype), " (activations and their gradients share one dtype)"));
  const std::size_t need = attention_backward_scratch_bytes(s.B, s.T, s.C, n_head);
  if (scratch_bytes < need || (need > 0 && scratch == nullptr))
    throw Error(cat(op, ": scratch of ", scratch_bytes, " bytes, needs ", need, " (attention_backward_scratch_bytes)"));
  if (s.B == 0 || s.T == 0) return;
  dispatch_float(qkv.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    Args<T> a = make_args<T>(s);
    a.qkv = static_cast<const T*>(qkv.data);
    a.out = static_cast<const T*>(out.data);
    a.dout = static_cast<const T*>(dout.data);
    a.dqkv = static_cast<T*>(dqkv.data);
    a.lse_in = static_cast<const float*>(lse.data);
    a.D = static_cast<float*>(scratch);
    a.starts = starts;
    a.vec = aligned16(a.qkv) && aligned16(a.dout);

    const std::int64_t rows = s.B * s.NH * s.T;
    constexpr int kRowsPerBlock = attn::kRowDotThreads / 32;
    const std::int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    ZT_CHECK(blocks <= INT_MAX, op, ": B*NH*T=", rows, " rows exceed the row-dot kernel's grid");
    attn::attention_row_dot_kernel<T><<<static_cast<unsigned>(blocks), attn::kRowDotThreads, 0, stream>>>(a);
    ZT_CUDA_LAUNCH_CHECK();
    dispatch_tile<T>(s.hs, [&](auto tile) {
      using M = decltype(tile);
      launch_backward<M>(s, a, stream);
    });
  });
}

}  // namespace zt::backend::cuda
