// A build without the CUDA backend: no devices to use, and no NCCL to talk over.
#include "core/error.hpp"
#include "dist/communicator.hpp"
#include "dist/world.hpp"

namespace zt::dist {

int cuda_device_count() { return 0; }
std::uint64_t cuda_device_memory_bytes(int) { return 0; }

std::unique_ptr<Communicator> make_nccl_communicator(const World&, int, void*, double) {
  throw ConfigError("dist.backend=nccl, but this ztrain binary was built without CUDA and NCCL: rebuild with "
                    "-DZTRAIN_CUDA=ON or use dist.backend=mpi");
}

}  // namespace zt::dist
