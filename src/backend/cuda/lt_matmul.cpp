// cuBLASLt plans: created on the first GEMM of a shape and reused, so the step loop pays for the
// heuristic once per distinct GEMM (a dozen in GPT-2) rather than on every call.
#include "backend/cuda/lt_matmul.hpp"

#include "backend/cuda/check.hpp"
#include "core/error.hpp"

namespace zt::backend::cuda {
namespace {

cudaDataType_t cuda_type(DType t, const char* op) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: throw Error(cat(op, ": cuBLASLt GEMM on unsupported dtype ", dtype_name(t)));
  }
}

// The largest power of two (up to cuBLASLt's default 256) dividing the address: algorithms needing
// more are excluded, so views at any element offset (parameters in a flat buffer) stay correct.
std::int64_t alignment(const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::int64_t a = 256;
  while (a > 1 && addr % static_cast<std::uintptr_t>(a) != 0) a /= 2;
  return a;
}

struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreference_t p) const { cublasLtMatmulPreferenceDestroy(p); }
};

}  // namespace

struct LtMatmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

LtMatmul::LtMatmul(void* workspace, std::size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  ZT_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

LtMatmul::~LtMatmul() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

LtMatmul::Plan& LtMatmul::plan_for(const LtGemm& g, const Key& key, const char* op) {
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  const cudaDataType_t ab = cuda_type(g.ab_type, op), dt = cuda_type(g.d_type, op);
  ZT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  ZT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (g.bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    ZT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    ZT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &dt, sizeof(dt)));
    // Set for the heuristic too, though it does not filter on the bias's alignment (see kLtBiasAlignment).
    ZT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  ZT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, ab, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda));
  ZT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, ab, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb));
  ZT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, dt, g.m, g.n, g.ldd));

  // The search preference lives only for this heuristic call (owned, so a failed check cannot leak it).
  cublasLtMatmulPreference_t raw_pref = nullptr;
  ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  const std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PreferenceDeleter> pref(raw_pref);
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value) {
    ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.get(), attr, &value, sizeof(value)));
  };
  const std::uint32_t align_a = static_cast<std::uint32_t>(alignment(g.a));
  const std::uint32_t align_b = static_cast<std::uint32_t>(alignment(g.b));
  const std::uint32_t align_d = static_cast<std::uint32_t>(alignment(g.d));
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(workspace_bytes_));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  // "No algorithm" comes back either as success with no result or as CUBLAS_STATUS_NOT_SUPPORTED: both
  // get the message with the shape; other statuses are real failures.
  const cublasStatus_t rc = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->d, plan->d,
                                                           pref.get(), 1, &result, &found);
  if (rc != CUBLAS_STATUS_NOT_SUPPORTED) ZT_CUBLAS_CHECK(rc);
  if (rc == CUBLAS_STATUS_NOT_SUPPORTED || found == 0 || result.state != CUBLAS_STATUS_SUCCESS)
    throw Error(cat(op, ": cuBLASLt has no algorithm for m=", g.m, " n=", g.n, " k=", g.k, " (A/B ",
                    dtype_name(g.ab_type), ", D ", dtype_name(g.d_type), g.bias ? ", bias epilogue" : "",
                    ", alignments ", align_a, "/", align_b, "/", align_d, " bytes)"));
  plan->algo = result.algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void LtMatmul::run(const LtGemm& g, cudaStream_t stream, const char* op) {
  if (g.m == 0 || g.n == 0) return;
  if (g.bias != nullptr && reinterpret_cast<std::uintptr_t>(g.bias) % kLtBiasAlignment != 0)
    throw Error(cat(op, ": cuBLASLt bias epilogue needs a ", kLtBiasAlignment, "-byte aligned bias, got ", g.bias,
                    " (stage it into an aligned block first)"));
  const Key key{g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldd, static_cast<std::int64_t>(g.ab_type),
                static_cast<std::int64_t>(g.d_type), g.bias != nullptr, alignment(g.a), alignment(g.b),
                alignment(g.d), g.bias ? alignment(g.bias) : 0, 0};
  Plan& plan = plan_for(g, key, op);
  if (g.bias != nullptr)
    ZT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  ZT_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &g.alpha, g.a, plan.a, g.b, plan.b, &g.beta, g.d, plan.d, g.d,
                                 plan.d, &plan.algo, workspace_, workspace_bytes_, stream));
}

}  // namespace zt::backend::cuda
