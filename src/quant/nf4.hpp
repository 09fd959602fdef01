// Block-wise quantization of frozen weights as bitsandbytes stores them for QLoRA (Dettmers et al.
// 2023): 4-bit NormalFloat (NF4) codes, each block of `block` values (64) scaled by its absolute maximum,
// two codes a byte; and double quantization, the blocks' fp32 scales less their mean stored as 8-bit
// codes of the signed dynamic map in blocks of 256, with one fp32 scale each (QLoRA section 3).
// Host-side and exact: the codes, the packing (element 2i in a byte's high nibble) and the arithmetic
// (x times the reciprocal of its block's absmax, clamped to [-1, 1], rounded to the nearest level, a
// value on a midpoint to the lower one) are bitsandbytes', so a quantized base made here or there
// holds the same bits (tests/unit/quant, checked against a PyTorch replay of its rules).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace zt::quant {

// The 16 NF4 levels, ascending (code i is level i): quantiles of N(0, 1) scaled to [-1, 1], with an
// exact 0 (QLoRA, appendix E).
const std::array<float, 16>& nf4_levels();
inline constexpr std::uint8_t kNf4ZeroCode = 7;  // nf4_levels()[7] == 0.0f
// The 256 values of the signed dynamic 8-bit map (bitsandbytes' create_dynamic_map(signed=True): for
// each exponent 10^-6 .. 10^0 a linear fraction of 1, 2, 4 .. 64 steps over (0.1, 1], both signs, 0 and
// 1), ascending: the code of double quantization.
const std::array<float, 256>& dynamic_map();

// 8-bit codes of dynamic_map(), a block of `block` values sharing one fp32 absmax.
struct Blockwise8 {
  std::vector<std::uint8_t> codes;
  std::vector<float> absmax;
  int block = 256;
};
Blockwise8 quantize_blockwise8(std::span<const float> x, int block = 256);
std::vector<float> dequantize_blockwise8(const Blockwise8& q);

// An NF4 tensor: `numel` values in blocks of `block` (the last may be short), packed two a byte (an odd
// count ends with a 0 code). Without double quantization `absmax` holds each block's scale; with it,
// the scales are offset + dequantize_blockwise8(nested_absmax).
struct Nf4Tensor {
  std::int64_t numel = 0;
  int block = 64;
  std::vector<std::uint8_t> packed;
  std::vector<float> absmax;
  bool nested = false;
  float offset = 0;
  Blockwise8 nested_absmax;
  // Bytes held: the codes and the scales, as a memory plan counts them.
  std::size_t bytes() const;
};
// Throws ConfigError naming `block` unless it is a power of two from 32 to 4096 (bitsandbytes' choices).
void check_block(int block);
// block: as check_block requires.
Nf4Tensor quantize_nf4(std::span<const float> x, int block = 64, bool double_quant = false);
// Each block's scale (dequantized when nested).
std::vector<float> block_scales(const Nf4Tensor& t);
// The values in fp32 (bitsandbytes computes this before its cast to the compute dtype).
std::vector<float> dequantize_nf4(const Nf4Tensor& t);

}  // namespace zt::quant
