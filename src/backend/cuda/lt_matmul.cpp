// cuBLASLt plans: created on the first GEMM of a shape and reused, so the step loop pays for the
// heuristic once per distinct GEMM (a dozen in GPT-2) rather than on every call.
#include "backend/cuda/lt_matmul.hpp"

#include "backend/cuda/check.hpp"
#include "backend/cuda/lt_api.hpp"
#include "core/error.hpp"

#include <string>

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
  void operator()(cublasLtMatmulPreference_t p) const { lt().MatmulPreferenceDestroy(p); }
};

// kNone with a bias is the plain bias epilogue (the form matmul_forward has always used).
LtEpilogue resolved(const LtGemm& g) {
  return g.epilogue == LtEpilogue::kNone && g.bias != nullptr ? LtEpilogue::kBias : g.epilogue;
}

bool writes_bias_grad(LtEpilogue e) {
  return e == LtEpilogue::kDgeluBgrad || e == LtEpilogue::kBgradA || e == LtEpilogue::kBgradB;
}
bool uses_aux(LtEpilogue e) {
  return e == LtEpilogue::kGeluAux || e == LtEpilogue::kGeluAuxBias || e == LtEpilogue::kDgelu ||
         e == LtEpilogue::kDgeluBgrad;
}

struct EpilogueInfo {
  cublasLtEpilogue_t value;
  const char* name;
};
EpilogueInfo epilogue_info(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kNone: return {CUBLASLT_EPILOGUE_DEFAULT, "no"};
    case LtEpilogue::kBias: return {CUBLASLT_EPILOGUE_BIAS, "BIAS"};
    case LtEpilogue::kGeluAux: return {CUBLASLT_EPILOGUE_GELU_AUX, "GELU_AUX"};
    case LtEpilogue::kGeluAuxBias: return {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, "GELU_AUX_BIAS"};
    case LtEpilogue::kDgelu: return {CUBLASLT_EPILOGUE_DGELU, "DGELU"};
    case LtEpilogue::kDgeluBgrad: return {CUBLASLT_EPILOGUE_DGELU_BGRAD, "DGELU_BGRAD"};
    case LtEpilogue::kBgradA: return {CUBLASLT_EPILOGUE_BGRADA, "BGRADA"};
    case LtEpilogue::kBgradB: return {CUBLASLT_EPILOGUE_BGRADB, "BGRADB"};
  }
  return {CUBLASLT_EPILOGUE_DEFAULT, "no"};
}

std::string describe(const LtGemm& g, const char* op) {
  const LtEpilogue e = resolved(g);
  const std::string bias_grad = writes_bias_grad(e) ? cat(" into ", dtype_name(g.bias_type)) : "";
  return cat(op, ": m=", g.m, " n=", g.n, " k=", g.k, " (A/B ", dtype_name(g.ab_type), ", D ", dtype_name(g.d_type),
             ", ", epilogue_info(e).name, " epilogue", bias_grad,
             uses_aux(e) ? cat(", aux ld ", g.ld_aux) : "", ", alignments ", alignment(g.a), "/", alignment(g.b), "/",
             alignment(g.d), " bytes)");
}

}  // namespace

struct LtMatmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ran = false;  // cublasLtMatmul has accepted it once
  ~Plan() {
    if (a) lt().MatrixLayoutDestroy(a);
    if (b) lt().MatrixLayoutDestroy(b);
    if (d) lt().MatrixLayoutDestroy(d);
    if (desc) lt().MatmulDescDestroy(desc);
  }
};

LtMatmul::LtMatmul(void* workspace, std::size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  ZT_CUBLAS_CHECK(lt().Create(&handle_));
}

LtMatmul::~LtMatmul() {
  plans_.clear();
  if (handle_) lt().Destroy(handle_);
}

namespace {

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  ZT_CUBLAS_CHECK(lt().MatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

// The epilogue and its operands' attributes. The bias and aux pointers are set here for the heuristic
// (which reads their alignment from them, though it does not filter on the bias's: kLtBiasAlignment) and
// again before every call.
void set_epilogue(cublasLtMatmulDesc_t desc, const LtGemm& g, const char* op) {
  const LtEpilogue e = resolved(g);
  set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue_info(e).value);
  if (e != LtEpilogue::kNone && e != LtEpilogue::kGeluAux && e != LtEpilogue::kDgelu) {
    const cudaDataType_t bias_type = cuda_type(writes_bias_grad(e) ? g.bias_type : g.d_type, op);
    set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
    set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  }
  if (uses_aux(e)) {
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.ld_aux);
  }
}

}  // namespace

LtMatmul::Plan* LtMatmul::plan_for(const LtGemm& g, const Key& key, const char* op) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  const cudaDataType_t ab = cuda_type(g.ab_type, op), dt = cuda_type(g.d_type, op);
  ZT_CUBLAS_CHECK(lt().MatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, ta);
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, tb);
  set_epilogue(plan->desc, g, op);
  ZT_CUBLAS_CHECK(lt().MatrixLayoutCreate(&plan->a, ab, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda));
  ZT_CUBLAS_CHECK(lt().MatrixLayoutCreate(&plan->b, ab, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb));
  ZT_CUBLAS_CHECK(lt().MatrixLayoutCreate(&plan->d, dt, g.m, g.n, g.ldd));

  // The search preference lives only for this heuristic call (owned, so a failed check cannot leak it).
  cublasLtMatmulPreference_t raw_pref = nullptr;
  ZT_CUBLAS_CHECK(lt().MatmulPreferenceCreate(&raw_pref));
  const std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PreferenceDeleter> pref(raw_pref);
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value) {
    ZT_CUBLAS_CHECK(lt().MatmulPreferenceSetAttribute(pref.get(), attr, &value, sizeof(value)));
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
  // "No algorithm" comes back as success with no result, as CUBLAS_STATUS_NOT_SUPPORTED, or (for an
  // epilogue this dtype combination lacks, e.g. an fp32 bias gradient beside a 16-bit D) as
  // CUBLAS_STATUS_INVALID_VALUE: all of them mean "unsupported" here; other statuses are real failures.
  const cublasStatus_t rc = lt().MatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->d, plan->d,
                                                           pref.get(), 1, &result, &found);
  const bool refused =
      rc == CUBLAS_STATUS_NOT_SUPPORTED || (rc == CUBLAS_STATUS_INVALID_VALUE && resolved(g) != LtEpilogue::kNone);
  if (!refused) ZT_CUBLAS_CHECK(rc);
  if (refused || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    plans_.emplace(key, nullptr);
    return nullptr;
  }
  plan->algo = result.algo;
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

bool LtMatmul::try_run(const LtGemm& g, cudaStream_t stream, const char* op) {
  if (g.m == 0 || g.n == 0) return true;
  const LtEpilogue e = resolved(g);
  if (g.bias != nullptr && reinterpret_cast<std::uintptr_t>(g.bias) % kLtBiasAlignment != 0)
    throw Error(cat(op, ": cuBLASLt bias epilogue needs a ", kLtBiasAlignment, "-byte aligned bias, got ", g.bias,
                    " (stage it into an aligned block first)"));
  ZT_CHECK((e != LtEpilogue::kBias && e != LtEpilogue::kGeluAuxBias && !writes_bias_grad(e)) || g.bias != nullptr, op,
           ": the ", epilogue_info(e).name, " epilogue needs a bias pointer");
  ZT_CHECK(!uses_aux(e) || (g.aux != nullptr && g.ld_aux >= g.m), op, ": the ", epilogue_info(e).name,
           " epilogue needs an aux matrix with ld_aux >= m=", g.m, ", got ld_aux=", g.ld_aux);
  if (uses_aux(e) && g.ld_aux % 8 != 0) return false;  // cuBLASLt's rule for the GELU input's leading dimension
  const Key key{g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldd, static_cast<std::int64_t>(g.ab_type),
                static_cast<std::int64_t>(g.d_type), static_cast<std::int64_t>(e),
                writes_bias_grad(e) ? static_cast<std::int64_t>(g.bias_type) : -1, g.ld_aux, alignment(g.a),
                alignment(g.b), alignment(g.d), g.bias ? alignment(g.bias) : 0, g.aux ? alignment(g.aux) : 0, 0, 0};
  const bool known = plans_.count(key) != 0;
  Plan* plan = plan_for(g, key, op);
  if (plan == nullptr) {
    if (!known) refused_.push_back(describe(g, op));
    return false;
  }
  if (g.bias != nullptr) set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (uses_aux(e)) set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
  const cublasStatus_t rc = lt().Matmul(handle_, plan->desc, &g.alpha, g.a, plan->a, g.b, plan->b, &g.beta, g.d, plan->d,
                                        g.d, plan->d, &plan->algo, workspace_, workspace_bytes_, stream);
  // The heuristic's algorithm can still be refused by the call itself for a fused epilogue (a dtype pair
  // the kernel lacks): at its first call nothing was queued, so that is a refusal like the heuristic's and
  // the caller runs the unfused ops. Afterwards, or for a plain GEMM, it is an error.
  const bool refused_at_call = !plan->ran && e != LtEpilogue::kNone &&
                               (rc == CUBLAS_STATUS_NOT_SUPPORTED || rc == CUBLAS_STATUS_INVALID_VALUE);
  if (refused_at_call) {
    plans_[key] = nullptr;
    refused_.push_back(describe(g, op) + " (refused at its first call)");
    return false;
  }
  ZT_CUBLAS_CHECK(rc);
  plan->ran = true;
  return true;
}

void LtMatmul::run(const LtGemm& g, cudaStream_t stream, const char* op) {
  if (!try_run(g, stream, op)) throw Error(cat(describe(g, op), ": cuBLASLt has no algorithm for it"));
}

}  // namespace zt::backend::cuda
