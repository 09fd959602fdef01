// One cuBLASLt GEMM in column-major terms, D = alpha * op(A) op(B) + beta * D (+ bias per row of D),
// fp32 compute, with the descriptors, layouts and the heuristic's algorithm cached per shape, dtypes and
// pointer alignment (the heuristic's choice is only valid for operands aligned as it was told).
// matmul.cu maps the row-major ops onto it.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "core/dtype.hpp"

namespace zt::backend::cuda {

// The bias epilogue's pointer must be aligned to this many bytes. cuBLASLt's alignment preferences
// cover A, B, C and D but not the bias, so the heuristic may pick a kernel that loads the bias 16 bytes
// at a time, which faults with "misaligned address" on a less aligned bias (PyTorch falls back to an
// unfused add below 16 bytes for the same reason). run() refuses such a bias; matmul.cu stages it.
constexpr std::size_t kLtBiasAlignment = 16;

// Column-major operands: A is m x k (k x m stored when trans_a), B is k x n (n x k when trans_b), D is
// m x n; ld* are the stored leading dimensions (elements). C is D itself (beta = 1 accumulates).
struct LtGemm {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  DType ab_type = DType::kF32;  // A and B share a dtype
  void* d = nullptr;
  std::int64_t ldd = 0;
  DType d_type = DType::kF32;
  float alpha = 1.0f, beta = 0.0f;
  const void* bias = nullptr;  // [m] in d_type, added to every column of D (CUBLASLT_EPILOGUE_BIAS); optional;
                               // kLtBiasAlignment-aligned
};

class LtMatmul {
 public:
  // `workspace` is device memory of `workspace_bytes` owned by the caller, outliving this object.
  LtMatmul(void* workspace, std::size_t workspace_bytes);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // Queues the GEMM on `stream`; `op` names the calling op in errors.
  void run(const LtGemm& g, cudaStream_t stream, const char* op);

 private:
  struct Plan;
  using Key = std::array<std::int64_t, 16>;
  Plan& plan_for(const LtGemm& g, const Key& key, const char* op);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  std::size_t workspace_bytes_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace zt::backend::cuda
