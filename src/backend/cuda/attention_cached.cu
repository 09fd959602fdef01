// Attention over a KV cache on the GPU (backend.hpp: attention_cached_forward), flash-decoding style
// (Dao et al. 2023): a query's keys are cut into splits of kKeysPerSplit, each split a block of its own,
// so one sequence's long cache still fills the GPU at batch 1; a second kernel combines the splits'
// partial softmax sums. A split is a fixed range of keys (key j in split j / kKeysPerSplit, whatever the
// batch), so a query's bits depend on its keys alone, not on the rows beside it. Three kernels on the
// op's stream, in order:
//   1. store: the new tokens' k and v rows into their slots' caches (the same X values);
//   2. split: block (query row, head, split) runs kWarps warps over the split's keys j <= p, each warp
//      an online softmax over every kWarps-th key (a lane holds hs/32 of q, of the key's dot product and
//      of the accumulator), then the warps merge in shared memory into the split's (max, sum, acc[hs]);
//   3. combine: out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M) over the query's splits (those
//      holding a key <= p), rounded to X once.
// A block whose split holds no key of its query (p < first, or a padding row) returns at once and writes
// nothing: a prefill chunk of T rows at positions up to T - 1 leaves about half its (row, split) blocks
// keyless, and a padding row all of them. The partials go through a scratch of at most
// cached_attention_scratch_bytes (attention_support.hpp), the queries in groups when more would not fit:
// a prefill of 4 x 8192 rows of Llama-8B's 32 heads would otherwise take 17 GiB.
// Math is fp32; every order is fixed by the launch, so the bits repeat. Head sizes up to 256.
#include <math_constants.h>

#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/attention_support.hpp"
#include "backend/op_checks.hpp"

namespace zt::backend::cuda {
namespace {

constexpr int kWarps = 4;              // warps per split block
constexpr int kKeysPerSplit = kCachedAttentionKeysPerSplit;  // keys one block walks
constexpr int kMaxDimsPerLane = 8;     // hs <= 256
constexpr int kMaxHeadSize = kWarp * kMaxDimsPerLane;

struct Dims {
  std::int64_t B, T, C, W, max_len, kv_width;
  std::int64_t first_item;  // the group's first (row, head) item: blockIdx.x and the partials count from it
  int hs, n_head, group, splits;
  float scale;
};

template <typename X>
__global__ void store_kernel(X* kc, X* vc, const X* qkv, const std::int32_t* slots, const std::int32_t* pos, Dims d) {
  const std::int64_t n = d.B * d.T * d.kv_width;
  for (std::int64_t i = grid_start(); i < n; i += grid_step()) {
    const std::int64_t row = i / d.kv_width, c = i % d.kv_width;
    const std::int32_t p = pos[row];
    if (p < 0) continue;
    const std::int64_t at = (static_cast<std::int64_t>(slots[row / d.T]) * d.max_len + p) * d.kv_width + c;
    kc[at] = qkv[row * d.W + d.C + c];
    vc[at] = qkv[row * d.W + d.C + d.kv_width + c];
  }
}

// partial [rows * NH * splits, hs + 2]: (m, l, acc[hs]) of each split; m = -inf, l = 0 where it has no key.
template <typename X>
__global__ void __launch_bounds__(kWarps * kWarp)
    split_kernel(float* partial, const X* qkv, const X* kc, const X* vc, const std::int32_t* slots,
                 const std::int32_t* pos, Dims d) {
  __shared__ float merge[kWarps][kMaxHeadSize + 2];
  const std::int64_t item = d.first_item + blockIdx.x;  // row * NH + h
  const int split = blockIdx.y, lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const std::int64_t row = item / d.n_head;
  const int h = static_cast<int>(item % d.n_head);
  const std::int32_t p = pos[row];
  const std::int64_t first = static_cast<std::int64_t>(split) * kKeysPerSplit;
  if (p < first) return;  // no key of this query here (a padding row: none anywhere); combine skips it
  const std::int64_t last = min(first + kKeysPerSplit - 1, static_cast<std::int64_t>(p));
  float q[kMaxDimsPerLane], acc[kMaxDimsPerLane];
  const X* qr = qkv + row * d.W + static_cast<std::int64_t>(h) * d.hs;
#pragma unroll
  for (int k = 0; k < kMaxDimsPerLane; ++k) {
    const int i = lane + k * kWarp;
    q[k] = i < d.hs ? to_f32(qr[i]) * d.scale : 0.0f;
    acc[k] = 0.0f;
  }
  const std::int64_t base = static_cast<std::int64_t>(slots[row / d.T]) * d.max_len * d.kv_width +
                            static_cast<std::int64_t>(h / d.group) * d.hs;
  float m = -CUDART_INF_F, l = 0.0f;
  for (std::int64_t j = first + warp; j <= last; j += kWarps) {
    const X* k_row = kc + base + j * d.kv_width;
    const X* v_row = vc + base + j * d.kv_width;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxDimsPerLane; ++k) {
      const int i = lane + k * kWarp;
      if (i < d.hs) s += q[k] * to_f32(k_row[i]);
    }
    s = warp_sum(s);
    const float m_new = fmaxf(m, s), correction = expf(m - m_new), e = expf(s - m_new);
    l = l * correction + e;
#pragma unroll
    for (int k = 0; k < kMaxDimsPerLane; ++k) {
      const int i = lane + k * kWarp;
      if (i < d.hs) acc[k] = acc[k] * correction + e * to_f32(v_row[i]);
    }
    m = m_new;
  }
  if (lane == 0) merge[warp][0] = m, merge[warp][1] = l;
#pragma unroll
  for (int k = 0; k < kMaxDimsPerLane; ++k) {
    const int i = lane + k * kWarp;
    if (i < d.hs) merge[warp][2 + i] = acc[k];
  }
  __syncthreads();
  float M = -CUDART_INF_F;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, merge[w][0]);
  float* out = partial + ((item - d.first_item) * d.splits + split) * (d.hs + 2);
  for (int i = threadIdx.x; i < d.hs + 2; i += blockDim.x) {
    float v = 0.0f;
    if (i == 0) v = M;
    else
      for (int w = 0; w < kWarps; ++w)
        if (merge[w][1] > 0.0f) v += merge[w][i] * expf(merge[w][0] - M);
    out[i] = v;
  }
}

// out [rows, C]: query row's head h from its splits' partials (the first `items` of the group); a
// padding row's is 0.
template <typename X>
__global__ void combine_kernel(X* out, const float* partial, const std::int32_t* pos, Dims d, std::int64_t items) {
  const std::int64_t n = items * d.hs;
  for (std::int64_t i = grid_start(); i < n; i += grid_step()) {
    const std::int64_t local = i / d.hs, c = i % d.hs, item = d.first_item + local, row = item / d.n_head;
    const float* part = partial + local * d.splits * (d.hs + 2);
    const int splits = pos[row] < 0 ? 0 : min(d.splits, static_cast<int>(pos[row] / kKeysPerSplit) + 1);  // written
    float M = -CUDART_INF_F;
    for (int s = 0; s < splits; ++s) M = fmaxf(M, part[s * (d.hs + 2)]);
    float l = 0.0f, acc = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float* ps = part + s * (d.hs + 2);
      if (ps[1] <= 0.0f) continue;
      const float w = expf(ps[0] - M);
      l += ps[1] * w;
      acc += ps[2 + c] * w;
    }
    out[row * d.C + (item % d.n_head) * d.hs + c] = from_f32<X>(pos[row] < 0 || l <= 0.0f ? 0.0f : acc / l);
  }
}

}  // namespace

void CudaBackend::attention_cached_forward(Tensor out, Tensor qkv, Tensor k_cache, Tensor v_cache, Tensor slots,
                                           Tensor positions, int n_head) {
  const char* op = "attention_cached_forward";
  const CachedAttentionDims c = check_cached_attention_shapes(op, out, qkv, k_cache, v_cache, slots, positions, n_head);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor&>{"qkv", qkv}, {"k_cache", k_cache}, {"v_cache", v_cache}})
    expect_compute(op, name, t, out.dtype);
  ZT_CHECK(c.hs <= kMaxHeadSize, op, ": head size ", c.hs, " is above the kernel's ", kMaxHeadSize);
  if (c.B * c.T == 0) return;
  Dims d{c.B, c.T, c.C, c.W, c.max_len, c.kv_width, 0, static_cast<int>(c.hs), n_head, n_head / c.n_kv_head,
         static_cast<int>((c.max_len + kKeysPerSplit - 1) / kKeysPerSplit), 1.0f / sqrtf(static_cast<float>(c.hs))};
  const std::int64_t items = c.B * c.T * n_head;
  const std::int64_t group = cached_attention_group(items, c.max_len, c.hs);
  Buffer partial = allocate(cached_attention_scratch_bytes(items, c.max_len, c.hs));
  const auto* slot = static_cast<const std::int32_t*>(slots.data);
  const auto* pos = static_cast<const std::int32_t*>(positions.data);
  dispatch_float(out.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    store_kernel<X><<<grid_stride_blocks(c.B * c.T * c.kv_width), kBlockThreads, 0, stream_>>>(
        static_cast<X*>(k_cache.data), static_cast<X*>(v_cache.data), static_cast<const X*>(qkv.data), slot, pos, d);
    ZT_CUDA_LAUNCH_CHECK();
    for (d.first_item = 0; d.first_item < items; d.first_item += group) {  // the partials' scratch reused in order
      const std::int64_t n = std::min(group, items - d.first_item);
      split_kernel<X><<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(d.splits)), kWarps * kWarp, 0, stream_>>>(
          static_cast<float*>(partial.data()), static_cast<const X*>(qkv.data), static_cast<const X*>(k_cache.data),
          static_cast<const X*>(v_cache.data), slot, pos, d);
      ZT_CUDA_LAUNCH_CHECK();
      combine_kernel<X><<<grid_stride_blocks(n * d.hs), kBlockThreads, 0, stream_>>>(
          static_cast<X*>(out.data), static_cast<const float*>(partial.data()), pos, d, n);
      ZT_CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace zt::backend::cuda
