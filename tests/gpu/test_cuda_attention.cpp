// The CUDA attention's own entry points (backend/cuda/attention.hpp), below the Backend interface that
// the op-case registry compares with the CPU (tests/ops/cases_attention.cpp): a backward that stays
// inside the scratch it is given (on a device; skips, saying why, without one), and, without a device,
// the shapes and dtypes refused before any launch and a scratch that grows with T, not T^2.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/attention.hpp"

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

// The backward's scratch (fp32 dQ accumulators, row terms) is exactly attention_backward_scratch_bytes:
// guard bytes after it keep their pattern, at T of one key, around the tile and block, GQA and MQA, in
// bf16 (the backend hands it memory from its caching allocator, where an overrun would hit a neighbour).
TEST(CudaAttentionScratch, BackwardStaysInsideItsScratch) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: the attention kernels run on a lent GPU";
  constexpr std::size_t kGuard = 256;
  for (const auto& [B, T, NH, NKV, hs] : {std::tuple<std::int64_t, std::int64_t, int, int, int>{1, 1, 1, 1, 16},
                                          {2, 65, 3, 3, 128},
                                          {2, 200, 4, 1, 64},
                                          {1, 257, 8, 2, 128}}) {
    const std::int64_t C = std::int64_t{NH} * hs, W = C + 2 * std::int64_t{NKV} * hs;
    const std::size_t scratch_bytes = attention_backward_scratch_bytes(B, T, C, NH);
    const std::size_t x = 2 * static_cast<std::size_t>(B * T);  // bf16 bytes per column
    void *qkv, *out, *lse, *dqkv, *scratch;
    ASSERT_EQ(cudaMalloc(&qkv, x * W), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&out, x * C), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&lse, 4 * B * NH * T), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dqkv, x * W), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&scratch, scratch_bytes + kGuard), cudaSuccess);
    cudaMemset(qkv, 0x3c, x * W);  // bf16 0x3c3c ~ 0.011: finite values
    cudaMemset(static_cast<char*>(scratch) + scratch_bytes, 0xA5, kGuard);
    const Tensor tq(qkv, DType::kBF16, {B, T, W}), to(out, DType::kBF16, {B, T, C}), tl(lse, DType::kF32, {B, NH, T}),
        td(dqkv, DType::kBF16, {B, T, W});
    attention_forward(to, tl, tq, NH, nullptr);
    attention_backward(td, to, tq, to, tl, NH, scratch, scratch_bytes, nullptr);  // dout = out
    std::vector<unsigned char> guard(kGuard);
    ASSERT_EQ(cudaMemcpy(guard.data(), static_cast<char*>(scratch) + scratch_bytes, kGuard, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(guard, std::vector<unsigned char>(kGuard, 0xA5)) << "B=" << B << " T=" << T << " NH=" << NH;
    for (void* p : {qkv, out, lse, dqkv, scratch}) cudaFree(p);
  }
}

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
