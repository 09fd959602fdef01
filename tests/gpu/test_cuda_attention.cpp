// The CUDA flash attention (backend/cuda/attention.hpp) against the CPU reference backend, case by
// case: forward out and lse, backward dqkv, in f32, bf16 and f16 (the CPU runs in fp32 on the same
// rounded inputs), at sequence lengths that are not multiples of the 64-row tile and every head-size
// step, for multi-head, grouped-query and multi-query attention. Also: the backward on the GPU's own
// forward outputs, every output element written (outputs start as NaN) and nothing past them (guard
// bytes), bitwise-repeatable backward, the scalar (unaligned) load path, the shape errors, and a
// scratch that grows with T, not T^2. Cases needing a device skip, saying why, where none is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/attention.hpp"
#include "backend/half.hpp"

namespace zt {
// Test names and failure messages show the dtype by name.
void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }
}  // namespace zt

namespace zt::backend::cuda {
namespace {

bool gpu_visible() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear "no driver"
    return false;
  }
  return n > 0;
}

#define ZT_REQUIRE_GPU() \
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: the attention kernels run on a lent GPU"

struct Case {
  std::int64_t B, T;
  int NH, hs;
  int NKV = 0;  // K/V heads (grouped-query attention); 0: NH, multi-head attention
  int kv() const { return NKV == 0 ? NH : NKV; }
  std::int64_t C() const { return static_cast<std::int64_t>(NH) * hs; }
  std::int64_t W() const { return C() + 2 * static_cast<std::int64_t>(kv()) * hs; }  // qkv row width
};

std::string describe(const Case& k, DType dtype) {
  return cat(dtype_name(dtype), " B=", k.B, " T=", k.T, " NH=", k.NH, " NKV=", k.kv(), " hs=", k.hs);
}

// Host values as they are stored in dtype (encode) and read back (decode), round to nearest even.
std::vector<std::uint8_t> encode(DType dtype, const std::vector<float>& v) {
  std::vector<std::uint8_t> bytes(v.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &v[i], 4);
    } else {
      const std::uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}
std::vector<float> decode(DType dtype, const std::vector<std::uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / dtype_size(dtype));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&v[i], bytes.data() + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      v[i] = dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  return v;
}
std::vector<float> rounded(DType dtype, const std::vector<float>& v) { return decode(dtype, encode(dtype, v)); }

std::vector<float> randn(std::size_t n, std::uint32_t seed, float stddev = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// ||got - want|| / ||want|| over [begin, end) of every row of `width` (one third of dqkv, or all).
double norm_error(const std::vector<float>& got, const std::vector<float>& want, std::int64_t width = 0,
                  std::int64_t begin = 0, std::int64_t end = 0) {
  if (width == 0) width = end = static_cast<std::int64_t>(want.size());
  double num = 0.0, den = 0.0;
  for (std::size_t row = 0; row < want.size() / width; ++row)
    for (std::int64_t c = begin; c < end; ++c) {
      const double g = got[row * width + c], w = want[row * width + c];
      num += (g - w) * (g - w);
      den += w * w;
    }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Device memory of `bytes`, `offset_bytes` into the allocation (to make it misaligned on purpose),
// followed by kGuardBytes of a known pattern that no kernel may write. Starts as all-ones bytes: NaN
// in f32, bf16 and f16, so an output element a kernel never writes fails every comparison.
class DeviceArray {
 public:
  static constexpr std::size_t kGuardBytes = 256;
  static constexpr unsigned char kGuard = 0xA5;
  explicit DeviceArray(std::size_t bytes, std::size_t offset_bytes = 0) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&base_, bytes + offset_bytes + kGuardBytes), cudaSuccess);
    ptr_ = static_cast<std::uint8_t*>(base_) + offset_bytes;
    EXPECT_EQ(cudaMemset(ptr_, 0xFF, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(static_cast<std::uint8_t*>(ptr_) + bytes, kGuard, kGuardBytes), cudaSuccess);
  }
  DeviceArray(const std::vector<std::uint8_t>& host, std::size_t offset_bytes = 0)
      : DeviceArray(host.size(), offset_bytes) {
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(base_); }
  void* get() const { return ptr_; }
  std::vector<std::uint8_t> host() const {
    std::vector<std::uint8_t> out(bytes_);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  bool guard_intact() const {
    std::vector<std::uint8_t> guard(kGuardBytes);
    EXPECT_EQ(cudaMemcpy(guard.data(), static_cast<const std::uint8_t*>(ptr_) + bytes_, kGuardBytes,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (std::uint8_t g : guard)
      if (g != kGuard) return false;
    return true;
  }

 private:
  void* base_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

struct Reference {
  std::vector<float> qkv, dout, out, lse, dqkv;  // inputs rounded to the dtype; outputs from the CPU
};

// The CPU backend's forward on the rounded qkv, then its backward on the rounded dout and on the
// forward's out rounded to the dtype (what a 16-bit run would have stored) and its lse. qkv_stddev
// above 1 makes the softmax rows peaked, so the running max jumps between key tiles.
Reference cpu_reference(const Case& k, DType dtype, std::uint32_t seed, float qkv_stddev = 1.0f) {
  const std::int64_t C = k.C();
  Reference r;
  r.qkv = rounded(dtype, randn(k.B * k.T * k.W(), seed, qkv_stddev));
  r.dout = rounded(dtype, randn(k.B * k.T * C, seed + 1));
  auto cpu = make_cpu_backend(0);
  Buffer qkv = cpu->allocate(r.qkv.size() * 4), out = cpu->allocate(k.B * k.T * C * 4),
         lse = cpu->allocate(k.B * k.NH * k.T * 4), dout = cpu->allocate(r.dout.size() * 4),
         dqkv = cpu->allocate(r.qkv.size() * 4);
  std::memcpy(qkv.data(), r.qkv.data(), r.qkv.size() * 4);
  std::memcpy(dout.data(), r.dout.data(), r.dout.size() * 4);
  const Tensor tq = qkv.view(DType::kF32, {k.B, k.T, k.W()}), to = out.view(DType::kF32, {k.B, k.T, C}),
               tl = lse.view(DType::kF32, {k.B, k.NH, k.T});
  cpu->attention_forward(to, tl, tq, k.NH);
  const float* po = static_cast<const float*>(out.data());
  const float* pl = static_cast<const float*>(lse.data());
  r.out.assign(po, po + k.B * k.T * C);
  r.lse.assign(pl, pl + k.B * k.NH * k.T);
  const std::vector<float> out_stored = rounded(dtype, r.out);
  std::memcpy(out.data(), out_stored.data(), out_stored.size() * 4);
  cpu->attention_backward(dqkv.view(DType::kF32, {k.B, k.T, k.W()}), dout.view(DType::kF32, {k.B, k.T, C}), tq, to, tl,
                          k.NH);
  const float* pd = static_cast<const float*>(dqkv.data());
  r.dqkv.assign(pd, pd + r.qkv.size());
  return r;
}

struct GpuResult {
  std::vector<float> out, lse, dqkv;
};

// Which out and lse the GPU backward reads.
enum class BackwardInputs {
  kReference,   // the CPU reference's (out rounded to the dtype): the backward's error is its own
  kGpuForward,  // the GPU forward's, as in training: its lse must rebuild the forward's P
};

// Forward on the reference's qkv, then backward. offset_bytes > 0 misaligns every tensor but lse and
// the scratch (the scalar load path).
GpuResult run_gpu(const Case& k, DType dtype, const Reference& r, std::size_t offset_bytes = 0,
                  BackwardInputs inputs = BackwardInputs::kReference) {
  const std::int64_t C = k.C();
  DeviceArray qkv(encode(dtype, r.qkv), offset_bytes), out(k.B * k.T * C * dtype_size(dtype), offset_bytes),
      lse(k.B * k.NH * k.T * 4);
  attention_forward(Tensor(out.get(), dtype, {k.B, k.T, C}), Tensor(lse.get(), DType::kF32, {k.B, k.NH, k.T}),
                    Tensor(qkv.get(), dtype, {k.B, k.T, k.W()}), k.NH, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  GpuResult g;
  g.out = decode(dtype, out.host());
  g.lse = decode(DType::kF32, lse.host());
  EXPECT_TRUE(out.guard_intact()) << "forward wrote past out";
  EXPECT_TRUE(lse.guard_intact()) << "forward wrote past lse";

  DeviceArray out_in(encode(dtype, rounded(dtype, r.out)), offset_bytes), lse_in(encode(DType::kF32, r.lse)),
      dout(encode(dtype, r.dout), offset_bytes), dqkv(r.qkv.size() * dtype_size(dtype), offset_bytes);
  const bool own = inputs == BackwardInputs::kGpuForward;
  const std::size_t scratch_bytes = attention_backward_scratch_bytes(k.B, k.T, C, k.NH);
  DeviceArray scratch(scratch_bytes);
  attention_backward(Tensor(dqkv.get(), dtype, {k.B, k.T, k.W()}), Tensor(dout.get(), dtype, {k.B, k.T, C}),
                     Tensor(qkv.get(), dtype, {k.B, k.T, k.W()}),
                     Tensor(own ? out.get() : out_in.get(), dtype, {k.B, k.T, C}),
                     Tensor(own ? lse.get() : lse_in.get(), DType::kF32, {k.B, k.NH, k.T}), k.NH, scratch.get(),
                     scratch_bytes, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  g.dqkv = decode(dtype, dqkv.host());
  EXPECT_TRUE(dqkv.guard_intact()) << "backward wrote past dqkv";
  EXPECT_TRUE(scratch.guard_intact()) << "backward wrote past its scratch";
  return g;
}

// Normalised-error bounds: fp32 differs from the CPU only in summation order; 16-bit runs round P and
// dS to the storage type before their tensor-core products and round every output.
double tolerance(DType dtype) { return dtype == DType::kF32 ? 1e-5 : dtype == DType::kBF16 ? 2e-2 : 5e-3; }

// max |v| over [begin, end) of every row of `width`.
double max_abs(const std::vector<float>& v, std::int64_t width, std::int64_t begin, std::int64_t end) {
  double m = 0.0;
  for (std::size_t row = 0; row < v.size() / width; ++row)
    for (std::int64_t c = begin; c < end; ++c) m = std::max(m, std::fabs(static_cast<double>(v[row * width + c])));
  return m;
}

void expect_matches_cpu(const Case& k, DType dtype, std::uint32_t seed, std::size_t offset_bytes = 0,
                        float qkv_stddev = 1.0f, BackwardInputs inputs = BackwardInputs::kReference) {
  const Reference r = cpu_reference(k, dtype, seed, qkv_stddev);
  const GpuResult g = run_gpu(k, dtype, r, offset_bytes, inputs);
  const double tol = tolerance(dtype);
  const std::int64_t C = k.C(), W = k.W(), KV = static_cast<std::int64_t>(k.kv()) * k.hs;
  EXPECT_LT(norm_error(g.out, r.out), tol) << "out " << describe(k, dtype);
  EXPECT_LT(norm_error(g.lse, r.lse), tol) << "lse " << describe(k, dtype);
  if (k.T == 1) {
    // One key: P = 1 and dS = dP - D = 0, so dq and dk are exactly zero and both sides hold only
    // rounding noise (the CPU's f32 dq is ~5e-8, not 0): a relative error of noise means nothing.
    EXPECT_LT(max_abs(g.dqkv, W, 0, C + KV), 1e-4) << "dq, dk " << describe(k, dtype);
  } else {
    EXPECT_LT(norm_error(g.dqkv, r.dqkv, W, 0, C), tol) << "dq " << describe(k, dtype);
    EXPECT_LT(norm_error(g.dqkv, r.dqkv, W, C, C + KV), tol) << "dk " << describe(k, dtype);
  }
  EXPECT_LT(norm_error(g.dqkv, r.dqkv, W, C + KV, W), tol) << "dv " << describe(k, dtype);
}

// T around the 64-row tile (1, 7, 63, 64, 65, 257), each head-size step (16, 32, 64, 128) and the
// padded ones between (8, 24, 40, 72, 96, 120: multiples of 8 run in the next step with zero
// columns), 1..48 heads (16 x 48 blocks on the grid's x).
const Case kCases[] = {
    {1, 1, 1, 16},   {2, 7, 3, 16},    {1, 63, 2, 32},  {2, 64, 1, 64},  {1, 65, 4, 64},
    {2, 257, 2, 64}, {1, 130, 12, 32}, {1, 257, 1, 128}, {2, 65, 3, 128}, {1, 100, 2, 24},
    {1, 129, 5, 40}, {1, 70, 2, 72},   {1, 90, 3, 8},   {2, 66, 2, 96},  {1, 80, 2, 120},
    {16, 65, 48, 16},
};

// Grouped-query (NKV dividing NH) and multi-query (NKV = 1) attention: query head h reads K/V head
// h / (NH/NKV); dK/dV sum the group. Odd T, every head-size step, groups of 2 to 12.
const Case kGqaCases[] = {
    {2, 65, 4, 64, 2}, {1, 130, 6, 32, 3}, {2, 70, 4, 16, 1}, {1, 257, 8, 128, 2}, {1, 100, 12, 64, 1},
    {2, 7, 2, 40, 1},
};

class CudaAttention : public ::testing::TestWithParam<DType> {};

TEST_P(CudaAttention, GroupedAndMultiQueryAttentionMatchTheCpuBackend) {
  ZT_REQUIRE_GPU();
  std::uint32_t seed = 101;
  for (const Case& k : kGqaCases) expect_matches_cpu(k, GetParam(), seed += 7);
  expect_matches_cpu({2, 129, 6, 64, 2}, GetParam(), 17, 0, 1.0f, BackwardInputs::kGpuForward);
  expect_matches_cpu({1, 90, 4, 64, 2}, GetParam(), 19, dtype_size(GetParam()));  // scalar load path
}

TEST_P(CudaAttention, MatchesTheCpuBackendAtOddLengthsAndEveryHeadSize) {
  ZT_REQUIRE_GPU();
  std::uint32_t seed = 1;
  for (const Case& k : kCases) expect_matches_cpu(k, GetParam(), seed += 7);
}

// Forward blocks hold 128 query rows (8 warps) over 64-key tiles: T short of one tile, just under and
// over the 128-row block (the block's second half partly or wholly past T), and a GQA group summed by
// the dK/dV blocks, at head sizes 64 and 128; one case on the GPU forward's own outputs.
TEST_P(CudaAttention, MatchesTheCpuBackendAroundThe128RowBlock) {
  ZT_REQUIRE_GPU();
  std::uint32_t seed = 201;
  for (const Case& k : {Case{1, 33, 2, 64}, Case{2, 127, 3, 64}, Case{1, 129, 2, 64}, Case{2, 200, 4, 64, 1},
                        Case{1, 255, 4, 64, 2}, Case{1, 65, 2, 128, 1}, Case{1, 200, 4, 128, 2}})
    expect_matches_cpu(k, GetParam(), seed += 7);
  expect_matches_cpu({2, 191, 4, 64, 2}, GetParam(), 23, 0, 1.0f, BackwardInputs::kGpuForward);
}

TEST_P(CudaAttention, MatchesTheCpuBackendAtGpt2ShapeT1024) {
  ZT_REQUIRE_GPU();
  expect_matches_cpu({4, 1024, 12, 64}, GetParam(), 42);
}

// Scores of standard deviation ~2.25 (q, k of 1.5): peaked rows whose running max moves by several
// units between key tiles, so a wrong online-softmax rescale (alpha) shows.
TEST_P(CudaAttention, MatchesTheCpuBackendWithPeakedSoftmaxRows) {
  ZT_REQUIRE_GPU();
  expect_matches_cpu({2, 200, 2, 64}, GetParam(), 31, 0, 1.5f);
  expect_matches_cpu({1, 150, 2, 128}, GetParam(), 37, 0, 1.5f);
}

// Training's path: the backward reads the GPU forward's own out and lse.
TEST_P(CudaAttention, BackwardOnTheGpuForwardOutputsMatchesTheCpuBackend) {
  ZT_REQUIRE_GPU();
  expect_matches_cpu({2, 257, 3, 64}, GetParam(), 11, 0, 1.0f, BackwardInputs::kGpuForward);
  expect_matches_cpu({1, 100, 2, 40}, GetParam(), 13, 0, 1.0f, BackwardInputs::kGpuForward);
}

TEST_P(CudaAttention, MisalignedTensorsTakeTheScalarLoadPath) {
  ZT_REQUIRE_GPU();
  const std::size_t one_element = dtype_size(GetParam());
  expect_matches_cpu({2, 70, 2, 64}, GetParam(), 5, one_element);
}

TEST_P(CudaAttention, BackwardIsBitwiseRepeatable) {
  ZT_REQUIRE_GPU();
  for (const Case& k : {Case{2, 200, 4, 64}, Case{2, 200, 4, 64, 2}, Case{1, 150, 6, 32, 1}, Case{1, 129, 2, 128, 1}}) {
    const Reference r = cpu_reference(k, GetParam(), 9);
    const GpuResult a = run_gpu(k, GetParam(), r), b = run_gpu(k, GetParam(), r);
    EXPECT_EQ(a.out, b.out) << describe(k, GetParam());
    EXPECT_EQ(a.lse, b.lse) << describe(k, GetParam());
    EXPECT_EQ(a.dqkv, b.dqkv) << describe(k, GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaAttention, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// Host-side checks: these run without a device (nothing is launched before they throw).
TEST(CudaAttentionChecks, UnsupportedHeadSizesThrowNamingOpAndValue) {
  for (const auto& [C, NH, hs] :
       {std::tuple{12, 1, 12}, std::tuple{272, 2, 136}, std::tuple{20, 1, 20}, std::tuple{0, 2, 0}}) {
    const Tensor qkv(nullptr, DType::kBF16, {1, 4, 3 * C}), out(nullptr, DType::kBF16, {1, 4, C}),
        lse(nullptr, DType::kF32, {1, NH, 4}), dqkv = qkv, dout = out;
    try {
      attention_forward(out, lse, qkv, NH, nullptr);
      ADD_FAILURE() << "hs=" << hs << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attention_forward"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("hs=C/n_head=" + std::to_string(C) + "/" + std::to_string(NH) + "=" +
                                           std::to_string(hs)),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(attention_backward(dqkv, dout, qkv, out, lse, NH, nullptr, 0, nullptr), Error);
  }
}

TEST(CudaAttentionChecks, MixedDtypesAndShortScratchThrow) {
  const Tensor qkv(nullptr, DType::kBF16, {2, 8, 3 * 64}), out(nullptr, DType::kBF16, {2, 8, 64}),
      out32(nullptr, DType::kF32, {2, 8, 64}), lse(nullptr, DType::kF32, {2, 1, 8}),
      lse16(nullptr, DType::kBF16, {2, 1, 8});
  EXPECT_THROW(attention_forward(out32, lse, qkv, 1, nullptr), Error);
  EXPECT_THROW(attention_forward(out, lse16, qkv, 1, nullptr), Error);
  EXPECT_THROW(attention_forward(out, Tensor(nullptr, DType::kF32, {2, 2, 8}), qkv, 1, nullptr), Error);
  const std::size_t need = attention_backward_scratch_bytes(2, 8, 64, 1);
  int fake = 0;  // never dereferenced: the size check fails first
  EXPECT_THROW(attention_backward(qkv, out, qkv, out, lse, 1, &fake, need - 1, nullptr), Error);
}

// qkv must hold q then k and v of NKV heads with NKV dividing n_head: 3 K/V heads for 4 query heads,
// or a width that is not whole heads, are refused before any launch.
TEST(CudaAttentionChecks, KvHeadsThatDoNotDivideTheQueryHeadsThrow) {
  const int NH = 4;
  const std::int64_t hs = 16, C = NH * hs;
  const Tensor out(nullptr, DType::kBF16, {1, 8, C}), lse(nullptr, DType::kF32, {1, NH, 8});
  for (const std::int64_t W : {C + 2 * 3 * hs, C + 2 * hs + 8, C}) {
    const Tensor qkv(nullptr, DType::kBF16, {1, 8, W});
    EXPECT_THROW(attention_forward(out, lse, qkv, NH, nullptr), Error) << "W=" << W;
    EXPECT_THROW(attention_backward(qkv, out, qkv, out, lse, NH, nullptr, 0, nullptr), Error) << "W=" << W;
  }
}

TEST(CudaAttentionChecks, BackwardScratchGrowsWithTNotTSquared) {
  const std::int64_t B = 4, C = 768;
  const int NH = 12, hs = 64;
  const std::size_t at_1024 = attention_backward_scratch_bytes(B, 1024, C, NH);
  EXPECT_GT(at_1024, 0u);
  EXPECT_LE(at_1024, static_cast<std::size_t>(B * NH * 1024 * hs) * sizeof(float));  // O(B*NH*T*hs)
  EXPECT_EQ(attention_backward_scratch_bytes(B, 8192, C, NH), 8 * at_1024);          // linear in T
}

}  // namespace
}  // namespace zt::backend::cuda
