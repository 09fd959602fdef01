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
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace zt::backend::cuda {

// The bias epilogue's pointer must be aligned to this many bytes. cuBLASLt's alignment preferences
// cover A, B, C and D but not the bias, so the heuristic may pick a kernel that loads the bias 16 bytes
// at a time, which faults with "misaligned address" on a less aligned bias (PyTorch falls back to an
// unfused add below 16 bytes for the same reason). run() refuses such a bias; matmul.cu stages it.
constexpr std::size_t kLtBiasAlignment = 16;

// What cuBLASLt fuses after the product (cublasLtEpilogue_t). In column-major terms, with P = alpha
// op(A) op(B) + beta D:
enum class LtEpilogue : std::int32_t {
  kNone,         // D = P
  kBias,         // D = P + bias[m] (input, d_type) on every column
  kGeluAux,      // aux = P, D = gelu(P) (tanh form); aux in d_type, leading dimension ld_aux
  kGeluAuxBias,  // aux = P + bias[m], D = gelu(aux)
  kDgelu,        // D = P * gelu'(aux) (aux: the GELU's input saved by the forward)
  kDgeluBgrad,   // as kDgelu, and bias[m] = sum over D's n columns of D (output, bias_type)
  kBgradA,       // D = P, and bias[m] = sum over k of op(A) (output, bias_type)
  kBgradB,       // D = P, and bias[n] = sum over k of op(B) (output, bias_type)
};

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
  // kBias: [m] in d_type, added to every column of D; with the default kNone a non-null bias means kBias.
  // The bias-gradient epilogues write [m] or [n] of bias_type here (=, not +=). kLtBiasAlignment-aligned.
  const void* bias = nullptr;
  LtEpilogue epilogue = LtEpilogue::kNone;
  DType bias_type = DType::kF32;  // the bias gradient's dtype (the kBias input is always d_type)
  void* aux = nullptr;            // the GELU epilogues' [m, n] matrix in d_type (column-major, ld_aux)
  std::int64_t ld_aux = 0;        // a multiple of 8, >= m (cuBLASLt's rule)
};

class LtMatmul {
 public:
  // `workspace` is device memory of `workspace_bytes` owned by the caller, outliving this object.
  LtMatmul(void* workspace, std::size_t workspace_bytes);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // Queues the GEMM on `stream`; `op` names the calling op in errors. Throws when cuBLASLt has no
  // algorithm for it.
  void run(const LtGemm& g, cudaStream_t stream, const char* op);
  // The same, returning false (nothing queued) where cuBLASLt has no algorithm for this shape, dtypes,
  // alignments and epilogue, so that the caller can run the unfused ops instead. The answer is cached
  // with the plan: an unsupported fusion costs one heuristic query per distinct GEMM.
  bool try_run(const LtGemm& g, cudaStream_t stream, const char* op);
  // The fused epilogues cuBLASLt refused so far ("DGELU_BGRAD m=3072 n=4096 k=768 bf16", one line each),
  // for the device checks to print: the ops then ran unfused.
  const std::vector<std::string>& refused() const { return refused_; }

 private:
  struct Plan;
  using Key = std::array<std::int64_t, 20>;
  Plan* plan_for(const LtGemm& g, const Key& key, const char* op);  // null: no algorithm

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  std::size_t workspace_bytes_;
  std::map<Key, std::unique_ptr<Plan>> plans_;  // null entries: no algorithm
  std::vector<std::string> refused_;
};

}  // namespace zt::backend::cuda
