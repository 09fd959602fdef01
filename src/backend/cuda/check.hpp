// Error checks for CUDA runtime and cuBLASLt calls: a failure throws zt::Error naming the call, the
// error string and the source line (never a silent status code).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "core/error.hpp"

#define ZT_CUDA_CHECK(call)                                                                              \
  do {                                                                                                   \
    const cudaError_t zt_cuda_rc_ = (call);                                                              \
    if (zt_cuda_rc_ != cudaSuccess)                                                                      \
      throw ::zt::Error(::zt::cat("CUDA: ", #call, " failed: ", cudaGetErrorString(zt_cuda_rc_), " (", \
                                  __FILE__, ":", __LINE__, ")"));                                       \
  } while (0)

#define ZT_CUBLAS_CHECK(call)                                                                            \
  do {                                                                                                   \
    const cublasStatus_t zt_cublas_rc_ = (call);                                                         \
    if (zt_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                                          \
      throw ::zt::Error(::zt::cat("cuBLASLt: ", #call, " failed: status ", static_cast<int>(zt_cublas_rc_), \
                                  " (", __FILE__, ":", __LINE__, ")"));                                 \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, at the launch that caused them.
#define ZT_CUDA_LAUNCH_CHECK() ZT_CUDA_CHECK(cudaGetLastError())
