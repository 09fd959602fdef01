// Attention over a KV cache (backend.hpp: attention_cached_forward), the CPU reference: the new tokens'
// k and v rows are copied into their slots' caches (the same X values, no rounding), then each query
// (row, head) takes its softmax over the cached keys [0, p] in two passes over its scores (max, then
// exp and sum) and the weighted sum of the values, all in fp32, the output rounded to X once.
// Every (row, head) is independent: any thread split gives the same bits.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/precision.hpp"

namespace zt::backend::cpu {
namespace {

// Every slot in [0, S), and used by one batch row with tokens at most (two rows writing one slot would
// race); rows of padding only may share one.
void check_slots(const char* op, const std::int32_t* slots, const std::int32_t* pos, const CachedAttentionDims& d) {
  const std::int64_t B = d.B, S = d.S;
  std::vector<bool> used(static_cast<std::size_t>(S), false);
  for (std::int64_t b = 0; b < B; ++b) {
    ZT_CHECK(slots[b] >= 0 && slots[b] < S, op, ": slots[", b, "] = ", slots[b], " is outside the cache's ", S, " slots");
    if (std::all_of(pos + b * d.T, pos + (b + 1) * d.T, [](std::int32_t p) { return p < 0; })) continue;
    ZT_CHECK(!used[static_cast<std::size_t>(slots[b])], op, ": slot ", slots[b], " appears in two batch rows");
    used[static_cast<std::size_t>(slots[b])] = true;
  }
}

template <typename X>
void store_keys_values(const X* qkv, X* kc, X* vc, const std::int32_t* slots, const std::int32_t* pos,
                       const CachedAttentionDims& d) {
  for (std::int64_t b = 0; b < d.B; ++b)
    for (std::int64_t t = 0; t < d.T; ++t) {
      const std::int32_t p = pos[b * d.T + t];
      if (p < 0) continue;
      const X* row = qkv + (b * d.T + t) * d.W;
      const std::int64_t at = (std::int64_t{slots[b]} * d.max_len + p) * d.kv_width;
      std::memcpy(kc + at, row + d.C, static_cast<std::size_t>(d.kv_width) * sizeof(X));
      std::memcpy(vc + at, row + d.C + d.kv_width, static_cast<std::size_t>(d.kv_width) * sizeof(X));
    }
}

template <typename X>
void attend(X* out, const X* qkv, const X* kc, const X* vc, const std::int32_t* slots, const std::int32_t* pos,
            const CachedAttentionDims& d, int n_head, int threads) {
  const std::int64_t hs = d.hs, group = n_head / d.n_kv_head, items = d.B * d.T * n_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> scores(static_cast<std::size_t>(d.max_len)), q(static_cast<std::size_t>(hs)),
        acc(static_cast<std::size_t>(hs));
#pragma omp for schedule(static)
    for (std::int64_t it = 0; it < items; ++it) {
      const std::int64_t row = it / n_head, h = it % n_head, b = row / d.T;
      X* o = out + row * d.C + h * hs;
      const std::int32_t p = pos[row];
      if (p < 0) {
        for (std::int64_t i = 0; i < hs; ++i) o[i] = store<X>(0.0f);
        continue;
      }
      const X* qr = qkv + row * d.W + h * hs;
      float* qf = q.data();
      float* af = acc.data();
      for (std::int64_t i = 0; i < hs; ++i) qf[i] = load(qr[i]);
      const std::int64_t base = std::int64_t{slots[b]} * d.max_len * d.kv_width + (h / group) * hs;
      float m = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j <= p; ++j) {
        const X* k = kc + base + j * d.kv_width;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (std::int64_t i = 0; i < hs; ++i) s += qf[i] * load(k[i]);
        scores[j] = s * scale;
        m = std::max(m, scores[j]);
      }
      float sum = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t j = 0; j <= p; ++j) {
        const float e = std::exp(scores[j] - m);
        sum += e;
        const X* v = vc + base + j * d.kv_width;
#pragma omp simd
        for (std::int64_t i = 0; i < hs; ++i) af[i] += e * load(v[i]);
      }
      for (std::int64_t i = 0; i < hs; ++i) o[i] = store<X>(af[i] / sum);
    }
  }
}

}  // namespace

void CpuBackend::attention_cached_forward(Tensor out, Tensor qkv, Tensor k_cache, Tensor v_cache, Tensor slots,
                                          Tensor positions, int n_head) {
  const char* op = "attention_cached_forward";
  const CachedAttentionDims d =
      check_cached_attention_shapes(op, out, qkv, k_cache, v_cache, slots, positions, n_head);
  const DType x = compute_dtype(op, {{"out", out, Role::kCompute}, {"qkv", qkv, Role::kCompute},
                                     {"k_cache", k_cache, Role::kCompute}, {"v_cache", v_cache, Role::kCompute}});
  const std::int32_t* slot = slots.i32(op);
  const std::int32_t* pos = check_positions(op, positions, d.B, d.T, d.max_len, true);
  check_slots(op, slot, pos, d);
  with_storage(x, [&](auto tag) {
    using X = decltype(tag);
    store_keys_values(data_as<X>(qkv), data_as<X>(k_cache), data_as<X>(v_cache), slot, pos, d);
    attend(data_as<X>(out), data_as<X>(qkv), data_as<X>(k_cache), data_as<X>(v_cache), slot, pos, d, n_head, threads_);
  });
}

}  // namespace zt::backend::cpu
