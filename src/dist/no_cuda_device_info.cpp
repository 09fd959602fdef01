// A build without the CUDA backend computes on CPUs only.
#include "dist/device_info.hpp"

namespace zt::dist {

std::string device_description(int) { return "cpu"; }

}  // namespace zt::dist
