// NVML through dlopen: four stable C entry points, declared here so the build needs no nvml.h.
#include "health/gpu_monitor.hpp"

#include <dlfcn.h>

#include "core/error.hpp"

namespace zt::health {
namespace {
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlHandleByIndex = int (*)(unsigned, void**);
using NvmlPower = int (*)(void*, unsigned*);              // milliwatts
using NvmlTemperature = int (*)(void*, int, unsigned*);   // sensor 0 = NVML_TEMPERATURE_GPU
constexpr int kNvmlSuccess = 0;

template <typename F>
F symbol(void* library, const char* name) {
  return reinterpret_cast<F>(dlsym(library, name));
}
}  // namespace

bool GpuMonitor::open(int index) {
  library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library_) return why_ = "libnvidia-ml.so.1 not found (no NVIDIA driver)", false;
  auto init = symbol<NvmlInit>(library_, "nvmlInit_v2");
  auto handle = symbol<NvmlHandleByIndex>(library_, "nvmlDeviceGetHandleByIndex_v2");
  if (!init || !handle || init() != kNvmlSuccess) return why_ = "nvmlInit failed", false;
  void* device = nullptr;
  if (handle(static_cast<unsigned>(index), &device) != kNvmlSuccess) return why_ = cat("no NVML device ", index), false;
  device_ = device;
  why_.clear();
  return true;
}

GpuMonitor::~GpuMonitor() {
  if (device_ && library_)
    if (auto shutdown = symbol<NvmlShutdown>(library_, "nvmlShutdown")) shutdown();
  if (library_) dlclose(library_);
}

GpuReading GpuMonitor::read() const {
  GpuReading r;
  if (!device_) return r;
  unsigned milliwatts = 0, celsius = 0;
  if (auto power = symbol<NvmlPower>(library_, "nvmlDeviceGetPowerUsage"); power && power(device_, &milliwatts) == kNvmlSuccess)
    r.power_w = milliwatts / 1000.0;
  if (auto temp = symbol<NvmlTemperature>(library_, "nvmlDeviceGetTemperature"); temp && temp(device_, 0, &celsius) == kNvmlSuccess)
    r.temp_c = celsius;
  return r;
}

}  // namespace zt::health
