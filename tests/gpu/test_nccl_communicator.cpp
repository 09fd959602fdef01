// The NCCL communicator on device buffers, one rank (NCCL cannot put two ranks on one GPU): every
// collective gives the textbook result, in place where the interface allows it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "core/error.hpp"
#include "dist/communicator.hpp"
#include "tests/mpi/mpi_test_world.hpp"

namespace zt::dist {
namespace {

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: the NCCL communicator runs on a lent GPU";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    comm_ = make_nccl_communicator(test::world(), 0, stream_, 60);
  }
  void TearDown() override {
    comm_.reset();
    if (stream_) cudaStreamDestroy(stream_);
  }
  float* device(const std::vector<float>& host) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    allocations_.push_back(p);
    return static_cast<float*>(p);
  }
  std::vector<float> host(const float* p, std::size_t n) {
    std::vector<float> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  ~NcclTest() override {
    for (void* p : allocations_) cudaFree(p);
  }

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Communicator> comm_;
  std::vector<void*> allocations_;
};

TEST_F(NcclTest, CollectivesOnOneRank) {
  const std::vector<float> values = {1, -2, 3.5f, 4, 5, 6, 7};
  float* a = device(values);
  comm_->all_reduce({a, values.size(), DType::kF32}, ReduceOp::kSum)->wait();
  EXPECT_EQ(host(a, values.size()), values);
  float* b = device(values);
  comm_->all_gather({b, values.size(), DType::kF32}, {b, values.size(), DType::kF32})->wait();  // in place
  EXPECT_EQ(host(b, values.size()), values);
  float* c = device(std::vector<float>(values.size(), 0));
  comm_->reduce_scatter({a, values.size(), DType::kF32}, {c, values.size(), DType::kF32}, ReduceOp::kSum)->wait();
  EXPECT_EQ(host(c, values.size()), values);
  comm_->broadcast({c, values.size(), DType::kF32}, 0)->wait();
  EXPECT_EQ(host(c, values.size()), values);
  EXPECT_EQ(comm_->all_reduce_value(2.5, ReduceOp::kMax), 2.5);
  EXPECT_EQ(comm_->stats().calls, 5u);
}

// ncclCommSplit (the process grid's TP and DP groups): a one-rank child that keeps the parent's
// watchdog settings and reduces on the same device buffers.
TEST_F(NcclTest, SplitGivesAWorkingChild) {
  comm_->set_context("grid");
  auto child = comm_->split(0, 0);
  EXPECT_EQ(child->size(), 1);
  EXPECT_EQ(child->rank(), 0);
  EXPECT_EQ(child->context(), "grid");
  EXPECT_EQ(child->timeout_s(), comm_->timeout_s());
  const std::vector<float> values = {1, 2, 3};
  float* a = device(values);
  child->all_reduce({a, values.size(), DType::kF32}, ReduceOp::kMax)->wait();
  EXPECT_EQ(host(a, values.size()), values);
  EXPECT_THROW(comm_->split(-1, 0), CommError);
}

// ncclSend/ncclRecv need a second GPU rank (pipeline stages); on one rank the only peer is itself,
// which the communicator refuses, naming the group (the transfers themselves: a 2-GPU run).
TEST_F(NcclTest, PointToPointRefusesItself) {
  float* a = device({1, 2});
  try {
    comm_->send({a, 2, DType::kF32}, 0);
    ADD_FAILURE() << "a send to itself was accepted";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("nccl send: peer 0 is not another rank of this group of 1"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(comm_->recv({a, 2, DType::kF32}, 1), CommError);
}

}  // namespace
}  // namespace zt::dist
