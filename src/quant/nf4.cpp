// Block-wise NF4 and 8-bit dynamic quantization (nf4.hpp).
#include "quant/nf4.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"

namespace zt::quant {
namespace {

// The code of the level nearest to v in an ascending table: the first level whose midpoint with the next
// is not below v (a value on a midpoint takes the lower level, as bitsandbytes' bucketize and its CUDA
// kernel's `>` comparisons do).
template <std::size_t N>
std::uint8_t nearest(const std::array<float, N>& levels, float v) {
  std::size_t lo = 0, hi = N - 1;  // the answer is in [lo, hi]
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (v <= (levels[mid] + levels[mid + 1]) / 2) hi = mid;
    else lo = mid + 1;
  }
  return static_cast<std::uint8_t>(lo);
}

// Each block's absmax and x scaled into [-1, 1] by its reciprocal. A zero block's is taken as 1e-38,
// so its codes are those of 0.0 (0x77), as bitsandbytes' CPU quantizer writes them; its CUDA kernel
// writes 0x00 there (0 * 1/0 is NaN, which falls to code 0: -1.0), which dequantizes to 0 without
// double quantization and to minus the nested scale's rounding error with it; 0x77 is 0 either way.
std::vector<float> scale_blocks(std::span<const float> x, int block, std::vector<float>& absmax) {
  const std::size_t n = x.size(), b = static_cast<std::size_t>(block);
  std::vector<float> scaled(n);
  absmax.assign((n + b - 1) / b, 0.0f);
  for (std::size_t k = 0; k < absmax.size(); ++k) {
    const std::size_t first = k * b, last = std::min(n, first + b);
    float m = 0;
    for (std::size_t i = first; i < last; ++i) m = std::max(m, std::fabs(x[i]));
    absmax[k] = m;
    const float inv = 1.0f / std::max(m, 1e-38f);
    for (std::size_t i = first; i < last; ++i) scaled[i] = std::clamp(x[i] * inv, -1.0f, 1.0f);
  }
  return scaled;
}

}  // namespace

void check_block(int block) {
  if (block < 32 || block > 4096 || (block & (block - 1)) != 0)
    throw ConfigError(cat("quantization block size ", block, " is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096"));
}

const std::array<float, 16>& nf4_levels() {
  static const std::array<float, 16> kLevels = {
      -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
      -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
      0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
      0.7229568362236023f, 1.0f};
  return kLevels;
}

// Generated once in float32 arithmetic (the map's definition, nf4.hpp), and rechecked against a PyTorch
// replay by tests/unit/quant.
const std::array<float, 256>& dynamic_map() {
  static const std::array<float, 256> kMap = {
    -0x1.fc6666p-1f, -0x1.f53332p-1f, -0x1.eep-1f, -0x1.e6ccccp-1f, -0x1.df9998p-1f, -0x1.d86666p-1f,
    -0x1.d13334p-1f, -0x1.cap-1f, -0x1.c2ccccp-1f, -0x1.bb9998p-1f, -0x1.b46666p-1f, -0x1.ad3332p-1f,
    -0x1.a6p-1f, -0x1.9eccccp-1f, -0x1.979998p-1f, -0x1.906666p-1f, -0x1.893334p-1f, -0x1.82p-1f,
    -0x1.7acccep-1f, -0x1.73999ap-1f, -0x1.6c6668p-1f, -0x1.653334p-1f, -0x1.5ep-1f, -0x1.56cccep-1f,
    -0x1.4f999ap-1f, -0x1.486666p-1f, -0x1.413334p-1f, -0x1.3ap-1f, -0x1.32ccccp-1f, -0x1.2b999ap-1f,
    -0x1.246668p-1f, -0x1.1d3334p-1f, -0x1.16p-1f, -0x1.0eccccp-1f, -0x1.07999ap-1f, -0x1.006666p-1f,
    -0x1.f26668p-2f, -0x1.e4p-2f, -0x1.d59998p-2f, -0x1.c73334p-2f, -0x1.b8ccccp-2f, -0x1.aa6664p-2f,
    -0x1.9cp-2f, -0x1.8d9998p-2f, -0x1.7f3334p-2f, -0x1.70ccccp-2f, -0x1.626664p-2f, -0x1.54p-2f,
    -0x1.459998p-2f, -0x1.373334p-2f, -0x1.28ccccp-2f, -0x1.1a6668p-2f, -0x1.0cp-2f, -0x1.fb3334p-3f,
    -0x1.de6668p-3f, -0x1.c1999ap-3f, -0x1.a4ccccp-3f, -0x1.88p-3f, -0x1.6b3332p-3f, -0x1.4e6666p-3f,
    -0x1.31999ap-3f, -0x1.14ccccp-3f, -0x1.fp-4f, -0x1.b66668p-4f, -0x1.93d70ap-4f, -0x1.8851eap-4f,
    -0x1.7ccccep-4f, -0x1.7147aep-4f, -0x1.65c29p-4f, -0x1.5a3d7p-4f, -0x1.4eb85p-4f, -0x1.433334p-4f,
    -0x1.37ae14p-4f, -0x1.2c28f6p-4f, -0x1.20a3d6p-4f, -0x1.151ebap-4f, -0x1.09999ap-4f, -0x1.fc28f4p-5f,
    -0x1.e51ebap-5f, -0x1.ce147ap-5f, -0x1.b70a3ep-5f, -0x1.ap-5f, -0x1.88f5c2p-5f, -0x1.71eb86p-5f,
    -0x1.5ae146p-5f, -0x1.43d70ap-5f, -0x1.2ccccep-5f, -0x1.15c28ep-5f, -0x1.fd70a4p-6f, -0x1.cf5c26p-6f,
    -0x1.a147aep-6f, -0x1.733334p-6f, -0x1.451eb8p-6f, -0x1.170a3ep-6f, -0x1.d1eb86p-7f, -0x1.75c29p-7f,
    -0x1.3e76c8p-7f, -0x1.2c083p-7f, -0x1.19999ap-7f, -0x1.072b02p-7f, -0x1.e978d4p-8f, -0x1.c49ba6p-8f,
    -0x1.9fbe76p-8f, -0x1.7ae148p-8f, -0x1.56041ap-8f, -0x1.3126e8p-8f, -0x1.0c49bap-8f, -0x1.ced914p-9f,
    -0x1.851eb8p-9f, -0x1.3b645ap-9f, -0x1.e353f8p-10f, -0x1.4fdf3ap-10f, -0x1.eecbfep-11f, -0x1.b3d07cp-11f,
    -0x1.78d5p-11f, -0x1.3dd982p-11f, -0x1.02de02p-11f, -0x1.8fc506p-12f, -0x1.19ce0ap-12f, -0x1.47ae16p-13f,
    -0x1.743e96p-14f, -0x1.15df66p-14f, -0x1.6f0068p-15f, -0x1.64840cp-16f, -0x1.040bfep-17f, -0x1.b43528p-19f,
    -0x1.27476ep-21f, 0.0f, 0x1.27476ep-21f, 0x1.b43528p-19f, 0x1.040bfep-17f, 0x1.64840cp-16f,
    0x1.6f0068p-15f, 0x1.15df66p-14f, 0x1.743e96p-14f, 0x1.47ae16p-13f, 0x1.19ce0ap-12f, 0x1.8fc506p-12f,
    0x1.02de02p-11f, 0x1.3dd982p-11f, 0x1.78d5p-11f, 0x1.b3d07cp-11f, 0x1.eecbfep-11f, 0x1.4fdf3ap-10f,
    0x1.e353f8p-10f, 0x1.3b645ap-9f, 0x1.851eb8p-9f, 0x1.ced914p-9f, 0x1.0c49bap-8f, 0x1.3126e8p-8f,
    0x1.56041ap-8f, 0x1.7ae148p-8f, 0x1.9fbe76p-8f, 0x1.c49ba6p-8f, 0x1.e978d4p-8f, 0x1.072b02p-7f,
    0x1.19999ap-7f, 0x1.2c083p-7f, 0x1.3e76c8p-7f, 0x1.75c29p-7f, 0x1.d1eb86p-7f, 0x1.170a3ep-6f,
    0x1.451eb8p-6f, 0x1.733334p-6f, 0x1.a147aep-6f, 0x1.cf5c26p-6f, 0x1.fd70a4p-6f, 0x1.15c28ep-5f,
    0x1.2ccccep-5f, 0x1.43d70ap-5f, 0x1.5ae146p-5f, 0x1.71eb86p-5f, 0x1.88f5c2p-5f, 0x1.ap-5f,
    0x1.b70a3ep-5f, 0x1.ce147ap-5f, 0x1.e51ebap-5f, 0x1.fc28f4p-5f, 0x1.09999ap-4f, 0x1.151ebap-4f,
    0x1.20a3d6p-4f, 0x1.2c28f6p-4f, 0x1.37ae14p-4f, 0x1.433334p-4f, 0x1.4eb85p-4f, 0x1.5a3d7p-4f,
    0x1.65c29p-4f, 0x1.7147aep-4f, 0x1.7ccccep-4f, 0x1.8851eap-4f, 0x1.93d70ap-4f, 0x1.b66668p-4f,
    0x1.fp-4f, 0x1.14ccccp-3f, 0x1.31999ap-3f, 0x1.4e6666p-3f, 0x1.6b3332p-3f, 0x1.88p-3f,
    0x1.a4ccccp-3f, 0x1.c1999ap-3f, 0x1.de6668p-3f, 0x1.fb3334p-3f, 0x1.0cp-2f, 0x1.1a6668p-2f,
    0x1.28ccccp-2f, 0x1.373334p-2f, 0x1.459998p-2f, 0x1.54p-2f, 0x1.626664p-2f, 0x1.70ccccp-2f,
    0x1.7f3334p-2f, 0x1.8d9998p-2f, 0x1.9cp-2f, 0x1.aa6664p-2f, 0x1.b8ccccp-2f, 0x1.c73334p-2f,
    0x1.d59998p-2f, 0x1.e4p-2f, 0x1.f26668p-2f, 0x1.006666p-1f, 0x1.07999ap-1f, 0x1.0eccccp-1f,
    0x1.16p-1f, 0x1.1d3334p-1f, 0x1.246668p-1f, 0x1.2b999ap-1f, 0x1.32ccccp-1f, 0x1.3ap-1f,
    0x1.413334p-1f, 0x1.486666p-1f, 0x1.4f999ap-1f, 0x1.56cccep-1f, 0x1.5ep-1f, 0x1.653334p-1f,
    0x1.6c6668p-1f, 0x1.73999ap-1f, 0x1.7acccep-1f, 0x1.82p-1f, 0x1.893334p-1f, 0x1.906666p-1f,
    0x1.979998p-1f, 0x1.9eccccp-1f, 0x1.a6p-1f, 0x1.ad3332p-1f, 0x1.b46666p-1f, 0x1.bb9998p-1f,
    0x1.c2ccccp-1f, 0x1.cap-1f, 0x1.d13334p-1f, 0x1.d86666p-1f, 0x1.df9998p-1f, 0x1.e6ccccp-1f,
    0x1.eep-1f, 0x1.f53332p-1f, 0x1.fc6666p-1f, 0x1p+0f,
  };
  return kMap;
}

Blockwise8 quantize_blockwise8(std::span<const float> x, int block) {
  check_block(block);
  Blockwise8 q;
  q.block = block;
  const std::vector<float> scaled = scale_blocks(x, block, q.absmax);
  q.codes.resize(scaled.size());
  for (std::size_t i = 0; i < scaled.size(); ++i) q.codes[i] = nearest(dynamic_map(), scaled[i]);
  return q;
}

std::vector<float> dequantize_blockwise8(const Blockwise8& q) {
  std::vector<float> out(q.codes.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = dynamic_map()[q.codes[i]] * q.absmax[i / static_cast<std::size_t>(q.block)];
  return out;
}

std::size_t Nf4Tensor::bytes() const {
  return packed.size() + absmax.size() * sizeof(float) + nested_absmax.codes.size() +
         nested_absmax.absmax.size() * sizeof(float);
}

Nf4Tensor quantize_nf4(std::span<const float> x, int block, bool double_quant) {
  check_block(block);
  Nf4Tensor t;
  t.numel = static_cast<std::int64_t>(x.size());
  t.block = block;
  const std::vector<float> scaled = scale_blocks(x, block, t.absmax);
  // An odd count's spare low nibble holds the code of 0.0, as bitsandbytes writes it (never read back).
  t.packed.assign((x.size() + 1) / 2, 0);
  if (x.size() % 2 != 0) t.packed.back() = kNf4ZeroCode;
  for (std::size_t i = 0; i < scaled.size(); ++i)
    t.packed[i / 2] |= static_cast<std::uint8_t>(nearest(nf4_levels(), scaled[i]) << (i % 2 == 0 ? 4 : 0));
  if (double_quant) {  // the scales less their mean (fp32), in 8 bits: QLoRA's double quantization
    t.nested = true;
    // The mean summed in double and rounded once (PyTorch's float mean sums in blocks, also closer
    // than a running float sum).
    t.offset = static_cast<float>(std::accumulate(t.absmax.begin(), t.absmax.end(), 0.0) /
                                  static_cast<double>(t.absmax.size()));
    std::vector<float> centred(t.absmax.size());
    for (std::size_t k = 0; k < centred.size(); ++k) centred[k] = t.absmax[k] - t.offset;
    t.nested_absmax = quantize_blockwise8(centred, 256);
    t.absmax.clear();
  }
  return t;
}

std::vector<float> block_scales(const Nf4Tensor& t) {
  if (!t.nested) return t.absmax;
  std::vector<float> scales = dequantize_blockwise8(t.nested_absmax);
  for (float& s : scales) s += t.offset;
  return scales;
}

std::vector<float> dequantize_nf4(const Nf4Tensor& t) {
  const std::vector<float> scales = block_scales(t);
  std::vector<float> out(static_cast<std::size_t>(t.numel));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint8_t code = i % 2 == 0 ? t.packed[i / 2] >> 4 : t.packed[i / 2] & 0xF;
    out[i] = nf4_levels()[code] * scales[i / static_cast<std::size_t>(t.block)];
  }
  return out;
}

}  // namespace zt::quant
