// Dropout with a counter-based mask (backend.hpp): element (row, col)'s fate is Philox at (first + row *
// row_stride + col, stream) under the seed, so any thread split, backend or later call gives the same mask.
#include <cmath>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/precision.hpp"
#include "backend/op_checks.hpp"
#include "core/rng.hpp"

namespace zt::backend::cpu {

void CpuBackend::dropout(Tensor out, Tensor inp, float p, std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                         std::int64_t row_stride) {
  const char* op = "dropout";
  const DType x = compute_dtype(op, {{"out", out, Role::kCompute}, {"inp", inp, Role::kCompute}});
  expect_same_numel(op, out, inp);
  const std::uint32_t threshold = dropout_threshold(op, p);
  const float keep_scale = 1.0f / (1.0f - p);
  const std::int64_t n = out.numel(), width = out.rank == 0 ? 1 : out.dim(-1);
  const std::int64_t stride = dropout_row_stride(op, out, row_stride);
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    T* o = data_as<T>(out);
    const T* in = data_as<T>(inp);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint64_t k = first + static_cast<std::uint64_t>(i / width * stride + i % width);
      const std::uint32_t word = rng::philox4x32_10(
          {static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k >> 32),
           static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
          {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)})[0];
      o[i] = store<T>(word >= threshold ? load(in[i]) * keep_scale : 0.0f);
    }
  });
}

}  // namespace zt::backend::cpu
