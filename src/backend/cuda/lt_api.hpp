// cuBLASLt, loaded when the CUDA backend first needs it (dlopen) instead of linked: a linked
// libcublasLt runs its static initialisers in every process at start-up, CPU ranks and --print-config
// included: about 0.5 s of CPU each (perf: 28% of `ztrain --version`'s samples were in libcublasLt, and
// most of the kernel's page faults), paid by every rank of every job. The types and signatures are the
// header's; only the twelve entry points the backend calls are resolved.
#pragma once

#include <cublasLt.h>

namespace zt::backend::cuda {

// The entry points, once: X(name) for each cublasLt<name> the backend calls.
#define ZT_LT_ENTRY_POINTS(X)                                                                            \
  X(Create) X(Destroy) X(Matmul) X(MatmulAlgoGetHeuristic) X(MatmulDescCreate) X(MatmulDescDestroy)         \
  X(MatmulDescSetAttribute) X(MatmulPreferenceCreate) X(MatmulPreferenceDestroy) X(MatmulPreferenceSetAttribute) \
  X(MatrixLayoutCreate) X(MatrixLayoutDestroy)

struct LtApi {
#define ZT_LT_MEMBER(name) decltype(&::cublasLt##name) name = nullptr;
  ZT_LT_ENTRY_POINTS(ZT_LT_MEMBER)
#undef ZT_LT_MEMBER
};

// Loads libcublasLt.so.<major of the headers> (the loader's search path first, LD_LIBRARY_PATH
// included, then the library the build found) once; throws ConfigError naming the library and the fix
// when it or an entry point is missing.
const LtApi& lt();

}  // namespace zt::backend::cuda
