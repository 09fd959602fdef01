// NF4 dequantization (backend.hpp): each element's 4-bit code picks one of the 16 NF4 levels, times its
// block's fp32 scale, rounded once to out's dtype; and double quantization's scales from their 8-bit
// codes. Element-wise, so any thread split gives the same bits, the same as quant::dequantize_nf4 and
// quant::block_scales (the host reference, bitsandbytes' rules).
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/precision.hpp"
#include "backend/op_checks.hpp"
#include "quant/nf4.hpp"

namespace zt::backend::cpu {

void CpuBackend::dequantize_nf4(Tensor out, Tensor codes, Tensor absmax, int block) {
  const int shift = check_blockwise_shapes("dequantize_nf4", out, codes, absmax, block, 2);
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

// The product is stored before the offset is added: two roundings, as bitsandbytes computes them (the
// build targets x86-64 without FMA, so nothing fuses them; quant::block_scales is the check).
void CpuBackend::dequantize_blockwise8(Tensor out, Tensor codes, Tensor absmax, int block, float offset) {
  const int shift = check_blockwise_shapes("dequantize_blockwise8", out, codes, absmax, block, 1);
  const float* map = quant::dynamic_map().data();
  const auto* c = static_cast<const std::uint8_t*>(codes.data);
  const float* scales = static_cast<const float*>(absmax.data);
  float* o = out.f32("dequantize_blockwise8");
  const std::int64_t n = out.numel();
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    o[i] = map[c[i]] * scales[i >> shift];
    o[i] += offset;
  }
}

}  // namespace zt::backend::cpu
