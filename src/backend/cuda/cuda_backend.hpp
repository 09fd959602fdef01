// The CUDA backend (cuda/): every backend op on device buffers of one GPU, bf16/f16/f32 per the
// precision rules in backend.hpp, GEMMs through cuBLASLt, a caching allocator, one compute stream.
// This header has no CUDA types, so the trainer includes it in every build.
#pragma once

#include <memory>

#include "backend/backend.hpp"

namespace zt::backend {

// Whether this build has the CUDA backend (ZTRAIN_CUDA found nvcc). Without it make_cuda_backend throws.
bool cuda_backend_built();

// The CUDA backend on device `device` (the node-local rank's GPU): selects the device for the calling
// thread, creates the compute stream, the cuBLASLt handle and the allocator. Throws ConfigError naming
// the device when it cannot (no such device, no driver, or a build without CUDA).
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace zt::backend
