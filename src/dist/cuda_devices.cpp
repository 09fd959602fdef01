// CUDA device discovery. Built only with the CUDA backend; the runtime is linked statically and a
// missing driver reads as zero devices, so the same binary runs on CPU-only nodes.
#include <cuda_runtime_api.h>

#include "dist/world.hpp"

namespace zt::dist {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" error
    return 0;
  }
  return count;
}

std::uint64_t cuda_device_memory_bytes(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return prop.totalGlobalMem;
}

}  // namespace zt::dist
