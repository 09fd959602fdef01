// The CPU backend's memory side: exact byte counting, alignment, Buffer ownership and views.
#include <gtest/gtest.h>

#include <cstdint>

#include "backend/backend.hpp"

namespace zt::backend {
namespace {

TEST(CpuMemory, CountsRequestedBytesAndPeak) {
  auto be = make_cpu_backend(2);
  EXPECT_EQ(be->memory_stats().current_bytes, 0u);
  {
    Buffer a = be->allocate(100);
    Buffer b = be->allocate(28);
    EXPECT_EQ(be->memory_stats().current_bytes, 128u);
    EXPECT_EQ(be->memory_stats().peak_bytes, 128u);
    a.reset();
    EXPECT_EQ(be->memory_stats().current_bytes, 28u);
    EXPECT_EQ(be->memory_stats().peak_bytes, 128u);
    be->reset_peak();
    EXPECT_EQ(be->memory_stats().peak_bytes, 28u);
  }
  EXPECT_EQ(be->memory_stats().current_bytes, 0u);
  EXPECT_EQ(be->memory_stats().peak_bytes, 28u);
}

TEST(CpuMemory, AllocationsAre64ByteAligned) {
  auto be = make_cpu_backend(1);
  for (std::size_t bytes : {1u, 3u, 64u, 65u, 1000u}) {
    Buffer b = be->allocate(bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u) << bytes;
  }
}

TEST(CpuMemory, ZeroBytesGiveAnEmptyBuffer) {
  auto be = make_cpu_backend(1);
  Buffer b = be->allocate(0);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(be->memory_stats().current_bytes, 0u);
}

TEST(Buffer, MoveTransfersOwnershipAndFreesOnce) {
  auto be = make_cpu_backend(1);
  Buffer a = be->allocate(256);
  void* p = a.data();
  Buffer b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), p);
  Buffer c = be->allocate(64);
  c = std::move(b);  // frees c's old 64 bytes
  EXPECT_EQ(be->memory_stats().current_bytes, 256u);
  c.reset();
  EXPECT_EQ(be->memory_stats().current_bytes, 0u);
}

TEST(Buffer, ViewChecksBoundsAndOffsets) {
  auto be = make_cpu_backend(1);
  Buffer b = be->allocate(10 * sizeof(float));
  Tensor t = b.view(DType::kF32, {2, 3}, 4);
  EXPECT_EQ(t.data, static_cast<char*>(b.data()) + 16);
  EXPECT_EQ(t.shape_string(), "[2, 3]");
  EXPECT_EQ(t.numel(), 6);
  EXPECT_THROW(b.view(DType::kF32, {2, 3}, 5), Error);
  EXPECT_THROW(b.view(DType::kF32, {11}), Error);
}

TEST(Tensor, WrongDtypeIsUnsupportedNotReinterpreted) {
  auto be = make_cpu_backend(1);
  Buffer b = be->allocate(64);
  Tensor half = b.view(DType::kBF16, {8});
  Tensor out = b.view(DType::kF32, {8});
  try {
    be->gelu_forward(out, half);  // bf16 in, f32 out: outside the precision rules (one compute dtype)
    FAIL() << "bf16 input with an f32 output was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gelu_forward: dtypes out=f32, inp=bf16"), std::string::npos) << e.what();
  }
}

TEST(CpuMemory, AttentionWorkspaceIsCountedWhileHeld) {
  auto be = make_cpu_backend(2);
  Buffer qkv = be->allocate(1 * 8 * 12 * sizeof(float));
  Buffer out = be->allocate(1 * 8 * 4 * sizeof(float));
  Buffer lse = be->allocate(1 * 2 * 8 * sizeof(float));
  const std::size_t before = be->memory_stats().current_bytes;
  be->fill_zero(qkv.view(DType::kF32, {1, 8, 12}));
  be->attention_forward(out.view(DType::kF32, {1, 8, 4}), lse.view(DType::kF32, {1, 2, 8}),
                        qkv.view(DType::kF32, {1, 8, 12}), 2);
  EXPECT_GT(be->memory_stats().current_bytes, before);
}

}  // namespace
}  // namespace zt::backend
