// Sizes of the CPU ops' scratch (CpuBackend::workspace), written once so that the ops request exactly
// what cpu_workspace_bytes() predicts for the memory planner.
//
// fp32 runs need only attention's per-thread score tiles. A 16-bit compute dtype X adds fp32 copies
// around the fp32 kernels (GEMMs and attention are OpenBLAS sgemm calls, which read only fp32):
//   matmul     inp, weight, out (forward) or dout, weight, inp (backward), whole: N*IC + IC*OC + N*OC
//              floats (+ OC for the bias). The tied LM head is the largest: N*C + Vp*C + N*Vp, about
//              the bytes of fp32 logits; a price the reference backend pays for reusing the sgemm path.
//   attention  qkv, out (forward) and also dout, dqkv (backward), whole: 8*N*C floats plus the tiles
//              (qkv narrower under grouped-query attention).
//   RMSNorm, RoPE and SwiGLU convert as they load and store, as LayerNorm does.
//   cross-entropy  one fp32 row of Vp per thread.
// LayerNorm, GELU, embedding and the element-wise ops convert as they load and store: no scratch.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace zt::backend::cpu {

// Every part starts on a 64-byte line, as allocations do, so a kernel sees scratch aligned like a tensor.
constexpr std::size_t line_floats(std::int64_t n) { return (static_cast<std::size_t>(n) + 15) / 16 * 16; }

// Attention's query-block height (rows per score tile).
constexpr std::int64_t kAttentionBlockQ = 64;

constexpr std::size_t attention_tile_floats(int threads, std::int64_t T, bool backward) {
  return line_floats(static_cast<std::int64_t>(threads) * (backward ? 2 : 1) * kAttentionBlockQ * T);
}
// W: the width of a qkv row, 3C for multi-head attention, C + 2 NKV hs for grouped-query attention.
constexpr std::size_t attention_x_floats(int threads, std::int64_t N, std::int64_t T, std::int64_t C, bool backward,
                                         std::int64_t W = 0) {
  const std::size_t qkv = line_floats(N * (W > 0 ? W : 3 * C)), out = line_floats(N * C);
  return attention_tile_floats(threads, T, backward) + (backward ? 2 * (qkv + out) : qkv + out);
}
constexpr std::size_t matmul_x_floats(std::int64_t N, std::int64_t IC, std::int64_t OC) {
  return line_floats(N * IC) + line_floats(IC * OC) + line_floats(N * OC) + line_floats(OC);
}
constexpr std::size_t cross_entropy_x_floats(int threads, std::int64_t Vp) {
  return static_cast<std::size_t>(threads) * line_floats(Vp);
}

// Hands out consecutive line-aligned parts of one workspace.
class ScratchParts {
 public:
  explicit ScratchParts(float* base) : next_(base) {}
  float* take(std::int64_t n) {
    float* p = next_;
    next_ += line_floats(n);
    return p;
  }

 private:
  float* next_;
};

}  // namespace zt::backend::cpu
