// NF4 dequantization (backend.hpp): each element's 4-bit code picks one of the 16 NF4 levels, times its
// block's fp32 scale, rounded once to out's dtype. Element-wise, so any thread split gives the same bits,
// the same as quant::dequantize_nf4 (the host reference, bitsandbytes' rule) in f32.
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/precision.hpp"
#include "backend/op_checks.hpp"
#include "quant/nf4.hpp"

namespace zt::backend::cpu {

void CpuBackend::dequantize_nf4(Tensor out, Tensor codes, Tensor absmax, int block) {
  const int shift = check_nf4_shapes("dequantize_nf4", out, codes, absmax, block);
  const float* levels = quant::nf4_levels().data();
  const auto* packed = static_cast<const std::uint8_t*>(codes.data);
  const float* scales = static_cast<const float*>(absmax.data);
  const std::int64_t n = out.numel();
  with_storage(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = data_as<T>(out);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint8_t byte = packed[i / 2];
      const int code = i % 2 == 0 ? byte >> 4 : byte & 0xF;  // element 2j in the high nibble (quant/nf4.hpp)
      o[i] = store<T>(levels[code] * scales[i >> shift]);
    }
  });
}

}  // namespace zt::backend::cpu
