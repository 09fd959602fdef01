// The cuDNN SDPA graphs (backend/cuda/cudnn_sdpa.hpp) built on the CPU: cuDNN's library checks each
// tensor and operation as it is finalised (shapes, strides, dtypes, how a matmul's operands and a
// reduction's output fit) and the operation graph as a whole, with no device. Forward and backward,
// bf16 and f16, multi-head, grouped-query and multi-query, head sizes 64 and 128, odd and long T, both
// backward algorithms. What needs the GPU (the heuristics' engines, execution) is tests/gpu's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cuda/cudnn_sdpa.hpp"

namespace zt::backend::cuda {
namespace {

SdpaKey key(SdpaKey::Pass pass, DType t, std::int64_t B, std::int64_t T, int NH, int NKV, int hs, bool det = true) {
  SdpaKey k;
  k.pass = pass, k.dtype = t, k.B = B, k.T = T, k.NH = NH, k.NKV = NKV, k.hs = hs, k.deterministic = det;
  return k;
}

std::vector<SdpaKey> keys(SdpaKey::Pass pass) {
  std::vector<SdpaKey> out;
  for (DType t : {DType::kBF16, DType::kF16})
    for (const auto& [B, T, NH, NKV, hs] : {std::tuple{16, 1024, 12, 12, 64}, std::tuple{2, 97, 4, 2, 128},
                                            std::tuple{4, 2048, 32, 8, 64}, std::tuple{1, 130, 6, 1, 128}})
      out.push_back(key(pass, t, B, T, NH, NKV, hs));
  return out;
}

TEST(CudnnSdpaGraph, ForwardGraphsFinaliseOperationByOperationAndAsAWhole) {
  for (const SdpaKey& k : keys(SdpaKey::Pass::kForward)) {
    SCOPED_TRACE(describe(k));
    cudnn::GraphBuilder g = cudnn::sdpa_graph(k);
    // Q K^T, the scale, the causal mask (2 indices, a comparison, a select), the softmax with its
    // statistics (max, subtract, exp, sum, log, add, divide), P V.
    EXPECT_EQ(g.operations(), 14u);
    EXPECT_NO_THROW(g.operation_graph(nullptr));
  }
}

TEST(CudnnSdpaGraph, BackwardGraphsFinaliseForBothAlgorithms) {
  for (const SdpaKey& base : keys(SdpaKey::Pass::kBackward))
    for (bool det : {true, false}) {
      SdpaKey k = base;
      k.deterministic = det;
      SCOPED_TRACE(describe(k));
      cudnn::GraphBuilder g = cudnn::sdpa_graph(k);
      // D (3), S (2), centred and masked (1 + 4), P and its transpose (2), dV (1, +1 reduction for GQA),
      // dP and dS with its transpose (5), dK (1, +1), K untransposed (1), dQ (1, +1 identity through the
      // f32 accumulator).
      const std::size_t grouped = k.NH != k.NKV ? 2 : 0;
      EXPECT_EQ(g.operations(), 21u + grouped + (det ? 0 : 1));
      EXPECT_NO_THROW(g.operation_graph(nullptr));
    }
}

// A graph with shapes that do not fit is refused by cuDNN as it is built, naming the call: the checks
// above are real.
TEST(CudnnSdpaGraph, AMismatchedMatmulIsRefusedWhenFinalised) {
  cudnn::GraphBuilder g;
  g.tensor(1, {{1, 1, 8, 16}, {128, 128, 16, 1}}, CUDNN_DATA_BFLOAT16, false);
  g.tensor(2, {{1, 1, 24, 8}, {192, 192, 8, 1}}, CUDNN_DATA_BFLOAT16, false);  // k = 24, not 16
  g.tensor(3, {{1, 1, 8, 8}, {64, 64, 8, 1}}, CUDNN_DATA_FLOAT, false);
  try {
    g.matmul(1, 2, 3);
    g.operation_graph(nullptr);
    ADD_FAILURE() << "cuDNN accepted a [8,16] x [24,8] matmul";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuDNN: "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zt::backend::cuda
