// Element-wise kernels in 16-byte packs: out[i] = f(in_0[i], ..., in_{N-1}[i]) computed in fp32 and
// rounded once on store, the same per-element arithmetic as a scalar loop. On the H200 the scalar
// bf16 loops (2-byte loads) reached ~1.3 TB/s (GELU backward: 0.225 ms for 300 MB at GPT-2 124M,
// micro-batch 16); whole 16-byte vectors (8 bf16/f16 or 4 f32 per load) are what the memory system
// serves at full rate. Used when every pointer is 16-byte aligned; the tail (n not a multiple of the
// pack) and misaligned views take the scalar loop.
// f is a functor with __device__ float operator()(float...) taking N arguments. out may alias an
// input: each thread reads its whole pack before it writes it.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"

namespace zt::backend::cuda {

template <typename T>
constexpr int kPackElems = 16 / static_cast<int>(sizeof(T));

template <typename T>
struct alignas(16) Pack {
  T v[kPackElems<T>];
};

template <typename T, int N>
struct MapInputs {
  const T* p[N];
};

template <typename T, int N, typename F>
__device__ __forceinline__ float apply_inputs(const F& f, const Pack<T> (&x)[N], int k) {
  if constexpr (N == 1) return f(to_f32(x[0].v[k]));
  else return f(to_f32(x[0].v[k]), to_f32(x[1].v[k]));
}

template <typename T, int N, typename F>
__device__ __forceinline__ float apply_scalar(const F& f, const MapInputs<T, N>& in, std::int64_t i) {
  if constexpr (N == 1) return f(to_f32(in.p[0][i]));
  else return f(to_f32(in.p[0][i]), to_f32(in.p[1][i]));
}

template <typename T, int N, typename F>
__global__ void map_kernel(T* out, MapInputs<T, N> in, std::int64_t n, bool packed, F f) {
  static_assert(N == 1 || N == 2, "map_kernel takes one or two inputs");
  constexpr int K = kPackElems<T>;
  std::int64_t scalar_from = 0;
  if (packed) {
    const std::int64_t packs = n / K;
    for (std::int64_t p = grid_start(); p < packs; p += grid_step()) {
      Pack<T> x[N];
#pragma unroll
      for (int j = 0; j < N; ++j) x[j] = reinterpret_cast<const Pack<T>*>(in.p[j])[p];
      Pack<T> y;
#pragma unroll
      for (int k = 0; k < K; ++k) y.v[k] = from_f32<T>(apply_inputs<T, N>(f, x, k));
      reinterpret_cast<Pack<T>*>(out)[p] = y;
    }
    scalar_from = packs * K;
  }
  for (std::int64_t i = scalar_from + grid_start(); i < n; i += grid_step())
    out[i] = from_f32<T>(apply_scalar<T, N>(f, in, i));
}

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Launches map_kernel on `stream` over n elements.
template <typename T, int N, typename F>
void launch_map(cudaStream_t stream, T* out, const std::array<const T*, N>& inputs, std::int64_t n, F f) {
  MapInputs<T, N> in{};
  bool packed = aligned16(out);
  for (int j = 0; j < N; ++j) {
    in.p[j] = inputs[j];
    packed = packed && aligned16(inputs[j]);
  }
  const std::int64_t work = packed ? n / kPackElems<T> + n % kPackElems<T> : n;
  map_kernel<T, N, F><<<grid_stride_blocks(work), kBlockThreads, 0, stream>>>(out, in, n, packed, f);
}

}  // namespace zt::backend::cuda
