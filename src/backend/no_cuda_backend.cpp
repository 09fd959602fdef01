// Builds without the CUDA backend (ZTRAIN_CUDA=OFF or no nvcc): the CPU backend only.
#include "backend/backend.hpp"

#include "core/error.hpp"

namespace zt::backend {

bool cuda_backend_built() { return false; }

std::unique_ptr<Backend> make_cuda_backend(int device, const CudaBackendOptions&) {
  throw ConfigError(cat("train.device=cuda (device ", device, "): this ztrain was built without the CUDA backend: ",
                        "rebuild with nvcc on PATH (tools/build.sh -DZTRAIN_CUDA=ON) or use train.device=cpu"));
}

}  // namespace zt::backend
