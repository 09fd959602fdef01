// CUDA builds without cuDNN (no cudnn.h or libcudnn at configure time): train.attention=auto runs the
// native kernels and says why; train.attention=cudnn is refused at start-up.
#include "backend/cuda/cudnn_attention.hpp"

namespace zt::backend::cuda {

std::unique_ptr<CudnnAttention> make_cudnn_attention(Backend&, AttentionImpl, int, bool) {
  throw Error("this ztrain was built without cuDNN (CMake found no cudnn.h and libcudnn: install cuDNN 9 or set "
              "CUDNN_HOME, then rebuild)");
}

}  // namespace zt::backend::cuda
