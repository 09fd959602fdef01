// Rotary position embedding (Su et al. 2021) in the rotate-half form of Hugging Face Llama's q/k
// layout, in place on the GPU, as the CPU twin (cpu/rope.cpp): channel i of a head pairs with channel
// i + hs/2, the angle t * inv_freq[i] and its cos/sin in fp32 (inv_freq already carries any llama3
// scaling: the model computes it once on the host), each element rounded to the storage type once.
// One thread per (row, head, pair): the two elements it rotates are read and written by it alone.
#include "backend/cuda/check.hpp"
#include "backend/cuda/checks.hpp"
#include "backend/cuda/cuda_backend_impl.hpp"
#include "backend/cuda/dtype_io.cuh"
#include "backend/cuda/launch.cuh"

namespace zt::backend::cuda {
namespace {

// x [B*T, W]: rotates pairs (i, i + half) of the first n_heads heads of 2*half columns by sign * angle.
// Row r sits at position r % T_len, or pos[r] when given (-1: left alone).
template <typename T>
__global__ void rope_kernel(T* x, const float* inv_freq, const std::int32_t* pos, std::int64_t rows, std::int64_t T_len,
                            std::int64_t W, int n_heads, int half, float sign) {
  const std::int64_t per_row = static_cast<std::int64_t>(n_heads) * half;
  for (std::int64_t i = grid_start(); i < rows * per_row; i += grid_step()) {
    const std::int64_t row = i / per_row, k = i % per_row;
    const int h = static_cast<int>(k / half), j = static_cast<int>(k % half);
    const std::int64_t t = pos != nullptr ? pos[row] : row % T_len;
    if (t < 0) continue;
    const float a = static_cast<float>(t) * inv_freq[j];
    float s, c;
    sincosf(a, &s, &c);  // full-range IEEE sincos (no fast-math): large angles at long positions
    s *= sign;
    T* p = x + row * W + static_cast<std::int64_t>(h) * 2 * half;
    const float x1 = to_f32(p[j]), x2 = to_f32(p[j + half]);
    p[j] = from_f32<T>(x1 * c - x2 * s);
    p[j + half] = from_f32<T>(x2 * c + x1 * s);
  }
}

void rope(const char* op, const Tensor& x, const Tensor& inv_freq, int n_rot_heads, float sign, cudaStream_t stream,
          const Tensor& positions = Tensor()) {
  const RopeDims d = check_rope_shapes(op, x, inv_freq, n_rot_heads);
  const std::int32_t* pos = check_positions(op, positions, d.B, d.T, 0, false);
  expect_dtype(op, "inv_freq", inv_freq, DType::kF32);
  const std::int64_t n = d.B * d.T * n_rot_heads * d.half;
  if (n == 0) return;
  dispatch_float(x.dtype, op, [&](auto tag) {
    using X = decltype(tag);
    rope_kernel<X><<<grid_stride_blocks(n), kBlockThreads, 0, stream>>>(
        static_cast<X*>(x.data), static_cast<const float*>(inv_freq.data), pos, d.B * d.T, d.T, d.W, n_rot_heads,
        to_int(op, "hs/2", d.half), sign);
  });
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace

void CudaBackend::rope_forward(Tensor x, Tensor inv_freq, int n_rot_heads, Tensor positions) {
  rope("rope_forward", x, inv_freq, n_rot_heads, 1.0f, stream_, positions);
}

// The rotation is orthogonal: its gradient is the rotation by the opposite angle.
void CudaBackend::rope_backward(Tensor dx, Tensor inv_freq, int n_rot_heads, Tensor positions) {
  rope("rope_backward", dx, inv_freq, n_rot_heads, -1.0f, stream_, positions);
}

}  // namespace zt::backend::cuda
