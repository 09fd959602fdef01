// The backends' dequantize_nf4 and dequantize_blockwise8 ops against quant/'s host dequantization
// (bitsandbytes' rules): the CPU backend's f32 output equals quant::dequantize_nf4 bit for bit on random
// tensors (odd counts, short last blocks, every block size bitsandbytes offers, double-quantized scales),
// the nested scales equal quant::block_scales, 16-bit outputs are the values rounded once, and malformed
// calls throw naming what is wrong. The CUDA
// twin is checked against this one by the op cases (tests/ops/cases_quant.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "backend/half.hpp"
#include "core/error.hpp"
#include "quant/nf4.hpp"
#include "tests/unit/quant/normal_values.hpp"

namespace zt::quant {
namespace {

using backend::Backend;
using backend::Buffer;
using backend::Tensor;

using testing::normal;

// t's codes and (host-dequantized) scales on the backend, and an output of t.numel values in `out`.
struct OnBackend {
  Buffer codes, absmax, out;
  Tensor codes_t, absmax_t, out_t;
  OnBackend(Backend& be, const Nf4Tensor& t, DType out_dtype) {
    const std::vector<float> scales = block_scales(t);
    codes = be.allocate(t.packed.size() + 1);
    absmax = be.allocate(scales.size() * sizeof(float) + 1);
    out = be.allocate(static_cast<std::size_t>(t.numel) * dtype_size(out_dtype) + 1);
    be.copy_from_host(codes.data(), t.packed.data(), t.packed.size());
    be.copy_from_host(absmax.data(), scales.data(), scales.size() * sizeof(float));
    codes_t = Tensor(codes.data(), DType::kU8, {static_cast<std::int64_t>(t.packed.size())});
    absmax_t = Tensor(absmax.data(), DType::kF32, {static_cast<std::int64_t>(scales.size())});
    out_t = Tensor(out.data(), out_dtype, {t.numel});
  }
};

std::vector<std::uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<std::uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

TEST(Nf4Op, CpuEqualsTheHostDequantizationBitForBit) {
  auto be = backend::make_cpu_backend(3);
  struct Shape {
    std::size_t n;
    int block;
    bool nested;
  };
  for (const Shape s : {Shape{1, 64, false}, Shape{1037, 64, false}, Shape{64 * 300 + 1, 64, true},
                        Shape{4096 + 33, 32, false}, Shape{5000, 128, true}, Shape{9999, 4096, false}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << s.n << " block=" << s.block << " nested=" << s.nested);
    const Nf4Tensor t = quantize_nf4(normal(s.n, 0.02f, static_cast<unsigned>(s.n)), s.block, s.nested);
    OnBackend b(*be, t, DType::kF32);
    be->dequantize_nf4(b.out_t, b.codes_t, b.absmax_t, s.block);
    std::vector<float> got(s.n);
    be->copy_to_host(got.data(), b.out.data(), s.n * sizeof(float));
    EXPECT_EQ(bits_of(got), bits_of(dequantize_nf4(t)));
  }
}

// Double quantization's scales on the backend (dequantize_blockwise8 of the nested codes) are
// quant::block_scales' bit for bit, and NF4 dequantization over them the host's values.
TEST(Nf4Op, NestedScalesOnTheBackendEqualTheHostsBitForBit) {
  auto be = backend::make_cpu_backend(3);
  for (const std::size_t n : {std::size_t{64}, std::size_t{64 * 1000 + 5}, std::size_t{64 * 256 * 3}}) {
    SCOPED_TRACE(n);
    const Nf4Tensor t = quantize_nf4(normal(n, 0.02f, static_cast<unsigned>(n)), 64, true);
    const Blockwise8& q = t.nested_absmax;
    const auto blocks = static_cast<std::int64_t>(q.codes.size());
    Buffer codes = be->allocate(q.codes.size()), absmax = be->allocate(q.absmax.size() * 4), out = be->allocate(q.codes.size() * 4);
    be->copy_from_host(codes.data(), q.codes.data(), q.codes.size());
    be->copy_from_host(absmax.data(), q.absmax.data(), q.absmax.size() * 4);
    be->dequantize_blockwise8(Tensor(out.data(), DType::kF32, {blocks}), Tensor(codes.data(), DType::kU8, {blocks}),
                              Tensor(absmax.data(), DType::kF32, {static_cast<std::int64_t>(q.absmax.size())}), q.block,
                              t.offset);
    std::vector<float> got(q.codes.size());
    be->copy_to_host(got.data(), out.data(), got.size() * 4);
    EXPECT_EQ(bits_of(got), bits_of(block_scales(t)));
  }
}

TEST(Nf4Op, SixteenBitOutputsAreTheF32ValuesRoundedOnce) {
  auto be = backend::make_cpu_backend(2);
  const Nf4Tensor t = quantize_nf4(normal(2001, 3.0f, 7), 64);
  const std::vector<float> want = dequantize_nf4(t);
  for (const DType x : {DType::kBF16, DType::kF16}) {
    OnBackend b(*be, t, x);
    be->dequantize_nf4(b.out_t, b.codes_t, b.absmax_t, 64);
    std::vector<std::uint16_t> got(want.size());
    be->copy_to_host(got.data(), b.out.data(), got.size() * 2);
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], x == DType::kBF16 ? backend::f32_to_bf16(want[i]) : backend::f32_to_f16(want[i])) << i;
  }
}

void expect_throws_naming(const std::function<void()>& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an error naming " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Nf4Op, MalformedCallsThrowNamingTheArgument) {
  auto be = backend::make_cpu_backend(1);
  const Nf4Tensor t = quantize_nf4(normal(200, 1.0f, 1), 64);  // 100 bytes, 4 blocks
  OnBackend b(*be, t, DType::kF32);
  Backend& cpu = *be;
  expect_throws_naming([&] { cpu.dequantize_nf4(b.out_t, b.codes_t, b.absmax_t, 48); }, "block=48");
  expect_throws_naming([&] { cpu.dequantize_nf4(b.out_t, b.codes_t, b.absmax_t, 32); }, "absmax");  // 7 blocks of 32
  expect_throws_naming([&] { cpu.dequantize_nf4(Tensor(b.out.data(), DType::kF32, {202}), b.codes_t, b.absmax_t, 64); },
                       "codes");
  expect_throws_naming(
      [&] { cpu.dequantize_nf4(b.out_t, Tensor(b.codes.data(), DType::kI32, {25}), b.absmax_t, 64); }, "codes must be u8");
  expect_throws_naming([&] { cpu.dequantize_nf4(Tensor(b.out.data(), DType::kI32, {200}), b.codes_t, b.absmax_t, 64); },
                       "out is i32");
  expect_throws_naming(  // 8-bit scales: f32 out only, one code a byte
      [&] { cpu.dequantize_blockwise8(Tensor(b.out.data(), DType::kBF16, {100}), b.codes_t, b.absmax_t, 32, 0); },
      "out is bf16");
  expect_throws_naming([&] { cpu.dequantize_blockwise8(Tensor(b.out.data(), DType::kF32, {99}), b.codes_t, b.absmax_t, 32, 0); },
                       "codes");
}

}  // namespace
}  // namespace zt::quant
