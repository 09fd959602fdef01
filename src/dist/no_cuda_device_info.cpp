// A build without the CUDA backend computes on CPUs only.
#include "dist/device_info.hpp"

namespace zt::dist {

std::string device_description(int) { return "cpu"; }
std::string cuda_versions() { return ""; }

}  // namespace zt::dist
