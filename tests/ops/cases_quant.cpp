// Op cases: NF4 dequantization (QLoRA's frozen base) into each compute dtype, exactly: both backends take
// the same fp32 product of a level and a block's scale and round it once; and the 8-bit codes of double
// quantization's scales back to f32, exactly. Random bytes as codes (every
// level, and an odd count's padding nibble set, which must not be read), scales with a zero block and one
// past f16's range (inf in f16 on both sides); an odd count with a short last block, a 2-D view, a view
// one element off, a single element, and (device) a tensor past one grid of the kernel's blocks.
#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

Kind kind_of(DType t) { return t == DType::kBF16 ? Kind::kBF16 : t == DType::kF16 ? Kind::kF16 : Kind::kF32; }

// |N(0, 0.05^2)| as absmax values (a trained weight's), with block 1 zero and block 2 at 1e5.
Values scales(std::uint32_t seed, std::size_t blocks) {
  Values v = squared(normal(seed, 0.2f));
  if (blocks < 3) return v;
  return with_at(std::move(v), {{1, 0.0f}, {2, 1e5f}});
}

OpCase nf4(Dims dims, int block, DType to, std::int64_t offset = 0, Where where = Where::kEverywhere) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  const std::int64_t bytes = (n + 1) / 2, blocks = (n + block - 1) / block;
  Arg dst = out("out", dims, kind_of(to)).matching(Match::kExact);
  return {.name = cat("dequantize_nf4 n=", n, " block=", block, " -> ", dtype_name(to),
                      offset ? cat(", out ", offset, " element off") : std::string(), dims.size() > 1 ? " 2-D" : ""),
          .args = {in("codes", {bytes}, uniform_ints(120, 256), Kind::kU8),
                   in("absmax", {blocks}, scales(121, static_cast<std::size_t>(blocks)), Kind::kF32),
                   offset ? dst.at(offset) : dst},
          .forward = [block](Call& c) { c.be.dequantize_nf4(c["out"], c["codes"], c["absmax"], block); },
          .dtypes = {DType::kF32},
          .where = where};
}

// Double quantization's scales: 8-bit codes (every one of the 256) times their block's scale plus the
// offset, f32 exactly (the same two roundings on both).
OpCase blockwise8(std::int64_t n, int block, float offset, Where where = Where::kEverywhere) {
  return {.name = cat("dequantize_blockwise8 n=", n, " block=", block, " offset=", offset),
          .args = {in("codes", {n}, uniform_ints(122, 256), Kind::kU8),
                   in("absmax", {(n + block - 1) / block}, squared(normal(123, 0.1f)), Kind::kF32),
                   out("out", {n}, Kind::kF32).matching(Match::kExact)},
          .forward = [block, offset](Call& c) {
            c.be.dequantize_blockwise8(c["out"], c["codes"], c["absmax"], block, offset);
          },
          .dtypes = {DType::kF32},
          .where = where};
}

}  // namespace

std::vector<OpCase> quant_cases() {
  std::vector<OpCase> cases;
  for (const DType to : {DType::kF32, DType::kBF16, DType::kF16}) {
    cases.push_back(nf4({1037}, 64, to));      // 16 blocks of 64 and one of 13; 519 bytes, a padding nibble
    cases.push_back(nf4({37, 29}, 128, to));   // a weight's 2-D view, 1073 values: 9 blocks, the last 49
  }
  cases.push_back(nf4({1037}, 64, DType::kBF16, 1));  // 16-bit stores at an odd address
  cases.push_back(nf4({1}, 64, DType::kF32));         // one value, half a byte
  cases.push_back(nf4({1000}, 1, DType::kF32));       // a scale per element: the two of a byte differ
  // 2^21 + 4001 values: more bytes than one launch's 4096 x 256 threads, so the grid-stride loop turns.
  cases.push_back(nf4({(1 << 21) + 4001}, 64, DType::kBF16, 0, Where::kDeviceOnly));
  cases.push_back(blockwise8(1037, 256, 0.0123f));  // four blocks of 256 and one of 13
  cases.push_back(blockwise8(1, 256, -0.5f));
  cases.push_back(blockwise8((1 << 20) + 4001, 256, 0.01f, Where::kDeviceOnly));  // the grid-stride loop turns
  return cases;
}

}  // namespace zt::backend::ops
