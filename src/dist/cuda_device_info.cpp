// The CUDA device, driver, runtime and NCCL versions for the start-up table. Any query that fails
// (no driver on this node) reads as "cpu" or "unknown": a description never stops a run.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>

#include "core/error.hpp"
#include "dist/device_info.hpp"

namespace zt::dist {
namespace {
// CUDA encodes versions as 1000 * major + 10 * minor (12040 = 12.4).
std::string cuda_version(int v) { return v > 0 ? cat(v / 1000, ".", (v % 1000) / 10) : std::string("unknown"); }

// NCCL encodes 10000 * major + 100 * minor + patch since 2.9 (1000 * major + 100 * minor + patch before).
std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess || v <= 0) return "unknown";
  const int major = v >= 10000 ? v / 10000 : v / 1000, rest = v >= 10000 ? v % 10000 : v % 1000;
  return cat(major, ".", rest / 100, ".", rest % 100);
}
}  // namespace

std::string device_description(int device) {
  cudaDeviceProp prop{};
  if (device < 0) return "cpu";
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return "(device properties unavailable)";
  }
  char pci[32];
  std::snprintf(pci, sizeof pci, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  return cat(prop.name, " (", pci, ")");
}

std::string cuda_versions() {
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) cudaGetLastError();
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) cudaGetLastError();
  return cat("driver CUDA ", cuda_version(driver), ", runtime ", cuda_version(runtime), ", NCCL ", nccl_version());
}

}  // namespace zt::dist
