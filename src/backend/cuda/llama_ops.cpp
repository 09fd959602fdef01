// Llama's ops on the CUDA backend (issue 17): RMSNorm, RoPE, SwiGLU, grouped-query attention and the
// embedding without a position table have CPU implementations only so far. Each refuses here with the
// fix, instead of computing something else; model::make_model refuses the combination before any work.
#include "backend/cuda/cuda_backend_impl.hpp"

namespace zt::backend::cuda {

[[noreturn]] void not_on_cuda(const char* op) {
  throw ConfigError(cat(op, ": not yet implemented on CUDA: use train.device=cpu (issue 17)"));
}

void CudaBackend::rmsnorm_forward(Tensor, Tensor, Tensor, Tensor, float) { not_on_cuda("rmsnorm_forward"); }
void CudaBackend::rmsnorm_backward(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor) {
  not_on_cuda("rmsnorm_backward");
}
void CudaBackend::rope_forward(Tensor, Tensor, int) { not_on_cuda("rope_forward"); }
void CudaBackend::rope_backward(Tensor, Tensor, int) { not_on_cuda("rope_backward"); }
void CudaBackend::swiglu_forward(Tensor, Tensor) { not_on_cuda("swiglu_forward"); }
void CudaBackend::swiglu_backward(Tensor, Tensor, Tensor) { not_on_cuda("swiglu_backward"); }

}  // namespace zt::backend::cuda
