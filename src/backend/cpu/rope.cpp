// Rotary position embedding (Su et al. 2021) in the rotate-half form Hugging Face Llama applies to its
// q/k layout: channel i of a head pairs with channel i + hs/2. In place; the angle t * inv_freq[i] and
// its cos/sin are fp32 as in HF's LlamaRotaryEmbedding; each element is rounded to the storage type once.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/precision.hpp"

namespace zt::backend::cpu {
namespace {

// Rotates the first n_heads heads of every [B*T] row of x [rows, W] by +angle (sign 1) or -angle (sign -1),
// row r at position r % T, or at pos[r] when given (-1: left alone).
template <typename T>
void rotate_rows(T* x, const float* inv_freq, const RopeDims& d, int n_heads, float sign, const std::int32_t* pos,
                 int threads) {
  const std::int64_t half = d.half, hs = 2 * half;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t row = 0; row < d.B * d.T; ++row) {
    if (pos != nullptr && pos[row] < 0) continue;
    const float t = static_cast<float>(pos != nullptr ? pos[row] : row % d.T);
    std::vector<float> cs(2 * half);
    for (std::int64_t i = 0; i < half; ++i) {
      const float a = t * inv_freq[i];
      cs[i] = std::cos(a);
      cs[half + i] = sign * std::sin(a);
    }
    for (int h = 0; h < n_heads; ++h) {
      T* p = x + row * d.W + h * hs;
      for (std::int64_t i = 0; i < half; ++i) {
        const float x1 = load(p[i]), x2 = load(p[i + half]), c = cs[i], s = cs[half + i];
        p[i] = store<T>(x1 * c - x2 * s);
        p[i + half] = store<T>(x2 * c + x1 * s);
      }
    }
  }
}

void rope(const char* op, const Tensor& x, const Tensor& inv_freq, int n_rot_heads, float sign, int threads,
          const Tensor& positions = Tensor()) {
  const RopeDims d = check_rope_shapes(op, x, inv_freq, n_rot_heads);
  const std::int32_t* pos = check_positions(op, positions, d.B, d.T, std::numeric_limits<std::int32_t>::max(), true);
  const DType dtype = compute_dtype(op, {{"x", x, Role::kCompute}, {"inv_freq", inv_freq, Role::kF32}});
  with_storage(dtype, [&](auto tag) {
    rotate_rows(data_as<decltype(tag)>(x), inv_freq.f32(op), d, n_rot_heads, sign, pos, threads);
  });
}

}  // namespace

void CpuBackend::rope_forward(Tensor x, Tensor inv_freq, int n_rot_heads, Tensor positions) {
  rope("rope_forward", x, inv_freq, n_rot_heads, 1.0f, threads_, positions);
}

// The rotation is orthogonal: its gradient is the rotation by the opposite angle.
void CpuBackend::rope_backward(Tensor dx, Tensor inv_freq, int n_rot_heads, Tensor positions) {
  rope("rope_backward", dx, inv_freq, n_rot_heads, -1.0f, threads_, positions);
}

}  // namespace zt::backend::cpu
