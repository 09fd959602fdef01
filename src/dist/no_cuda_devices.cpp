// CUDA device discovery in a build without the CUDA backend: there are none to use.
#include "dist/world.hpp"

namespace zt::dist {

int cuda_device_count() { return 0; }

}  // namespace zt::dist
