// The CUDA backend's memory side: a missing device is a ConfigError naming it and the count (checked
// with or without a GPU), copies round-trip, memory_stats counts live bytes, and a repeated training-
// like step (activations, op scratch, cuBLASLt, sum_of_squares) makes no new device allocation once
// warm.
#include "backend/cuda/cuda_backend_impl.hpp"
#include "tests/gpu/cuda_op_test_util.hpp"

namespace zt::backend::test {
namespace {

TEST(CudaBackendBuild, IsBuiltInThisConfiguration) { EXPECT_TRUE(cuda_backend_built()); }

// Runs everywhere: with no GPU every device is missing; with one, device 1000 is.
TEST(CudaBackendBuild, MissingDeviceIsAConfigErrorNamingTheDevice) {
  try {
    make_cuda_backend(1000);
    ADD_FAILURE() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("1000"), std::string::npos) << msg;
    if (visible_gpus() > 0) {
      EXPECT_NE(msg.find(cat("has ", visible_gpus(), " visible")), std::string::npos) << msg;
    }
  }
}

using CudaMemory = CudaVsCpu;

TEST_F(CudaMemory, CopiesRoundTripAndStatsCountLiveBytes) {
  const MemoryStats before = gpu_->memory_stats();
  std::vector<float> host = randn(1000, 1);
  {
    Buffer a = gpu_->allocate(host.size() * sizeof(float));
    Buffer b = gpu_->allocate(host.size() * sizeof(float));
    EXPECT_EQ(gpu_->memory_stats().current_bytes, before.current_bytes + 8000);
    gpu_->copy_from_host(a.data(), host.data(), 4000);
    gpu_->copy(b.data(), a.data(), 4000);
    std::vector<float> back(host.size());
    gpu_->copy_to_host(back.data(), b.data(), 4000);
    EXPECT_EQ(back, host);
  }
  const MemoryStats after = gpu_->memory_stats();
  EXPECT_EQ(after.current_bytes, before.current_bytes);
  EXPECT_GE(after.peak_bytes, before.current_bytes + 8000);
  gpu_->reset_peak();
  EXPECT_EQ(gpu_->memory_stats().peak_bytes, after.current_bytes);
  EXPECT_NE(gpu_->stream(), nullptr);
}

// One "step" of GPT-2-like work in bf16 with its own activations and every op that takes scratch from
// the allocator (layernorm/matmul backward column sums, sum_of_squares); buffers die at the end.
void training_like_step(Backend& be) {
  const std::int64_t N = 300, C = 96, OC = 384;
  const DType X = DType::kBF16;
  Buffer x = be.allocate(N * C * 2), h = be.allocate(N * C * 2), y = be.allocate(N * OC * 2);
  Buffer a = be.allocate(N * OC * 2), dh = be.allocate(N * C * 2), dx = be.allocate(N * C * 2);
  Buffer w = be.allocate(C * OC * 2), lnw = be.allocate(C * 2), lnb = be.allocate(C * 2);
  Buffer dw = be.allocate(C * OC * 4), db = be.allocate(OC * 4), dlnw = be.allocate(C * 4), dlnb = be.allocate(C * 4);
  Buffer stats = be.allocate(2 * N * 4);
  Tensor tx = x.view(X, {N, C}), th = h.view(X, {N, C}), ty = y.view(X, {N, OC}), ta = a.view(X, {N, OC});
  Tensor tw = w.view(X, {C, OC}), tlnw = lnw.view(X, {C}), tlnb = lnb.view(X, {C});
  Tensor tdw = dw.view(DType::kF32, {C, OC}), tdb = db.view(DType::kF32, {OC});
  for (const Tensor& t : {tx, tw, tlnw, tlnb, tdw, tdb}) be.fill_zero(t);
  Tensor mean = stats.view(DType::kF32, {N}), rstd = stats.view(DType::kF32, {N}, N);
  be.layernorm_forward(th, mean, rstd, tx, tlnw, tlnb);
  be.matmul_forward(ty, th, tw, Tensor(), WeightLayout::kInOut);
  be.gelu_forward(ta, ty);
  be.gelu_backward(ta, ty, ta);
  be.matmul_backward(dh.view(X, {N, C}), tdw, tdb, ta, th, tw, WeightLayout::kInOut);
  be.layernorm_backward(dx.view(X, {N, C}), dlnw.view(DType::kF32, {C}), dlnb.view(DType::kF32, {C}),
                        dh.view(X, {N, C}), tx, tlnw, mean, rstd);
  be.sum_of_squares(tdw);
}

TEST_F(CudaMemory, WarmStepLoopMakesNoNewDeviceAllocations) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(gpu_.get());
  ASSERT_NE(cuda, nullptr);
  training_like_step(*gpu_);
  gpu_->synchronize();
  const std::size_t warm = cuda->allocator_stats().raw_allocations;
  std::size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  for (int step = 0; step < 3; ++step) training_like_step(*gpu_);
  gpu_->synchronize();
  EXPECT_EQ(cuda->allocator_stats().raw_allocations, warm);
  std::size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  // Device-wide: ctest runs this binary alone (RUN_SERIAL) so that no other process moves the number.
  EXPECT_EQ(free_after, free_before) << "device memory was allocated or freed outside the caching allocator";
  cuda->empty_cache();
  EXPECT_EQ(cuda->allocator_stats().cached_bytes, 0u);
}

}  // namespace
}  // namespace zt::backend::test
