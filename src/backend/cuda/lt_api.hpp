// cuBLASLt, loaded when the CUDA backend first needs it (dlopen) instead of linked: a linked
// libcublasLt runs its static initialisers in every process at start-up, CPU ranks and --print-config
// included: about 0.5 s of CPU each (perf: 28% of `ztrain --version`'s samples were in libcublasLt, and
// most of the kernel's page faults), paid by every rank of every job. The types and signatures are the
// header's; only the twelve entry points the backend calls are resolved.
#pragma once

#include <cublasLt.h>

namespace zt::backend::cuda {

struct LtApi {
  decltype(&::cublasLtCreate) Create = nullptr;
  decltype(&::cublasLtDestroy) Destroy = nullptr;
  decltype(&::cublasLtMatmul) Matmul = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic = nullptr;
  decltype(&::cublasLtMatmulDescCreate) MatmulDescCreate = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) MatmulDescDestroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) MatrixLayoutCreate = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy = nullptr;
};

// Loads libcublasLt.so.<major of the headers> (the loader's search path first, LD_LIBRARY_PATH
// included, then the library the build found) once; throws ConfigError naming the library and the fix
// when it or an entry point is missing.
const LtApi& lt();

}  // namespace zt::backend::cuda
