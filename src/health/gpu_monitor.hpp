// GPU power and temperature through NVML, loaded at run time (dlopen of libnvidia-ml.so.1), so the
// same binary runs where no NVIDIA driver exists: there the monitor is simply unavailable.
#pragma once

#include <string>

namespace zt::health {

struct GpuReading {
  double power_w = 0;  // board power draw
  double temp_c = 0;   // GPU core temperature
};

class GpuMonitor {
 public:
  GpuMonitor() = default;
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // Loads NVML and finds CUDA device `index`; returns false (and stays unavailable) on any failure,
  // with the reason in why_unavailable().
  bool open(int index);
  bool available() const { return device_ != nullptr; }
  const std::string& why_unavailable() const { return why_; }
  GpuReading read() const;

 private:
  void* library_ = nullptr;
  void* device_ = nullptr;  // nvmlDevice_t
  std::string why_ = "not opened";
};

}  // namespace zt::health
