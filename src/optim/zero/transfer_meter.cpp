#include "optim/zero/transfer_meter.hpp"

#include <cstdio>

namespace zt::optim {
namespace {
double seconds_since(TransferMeter::Clock::time_point t) {
  return std::chrono::duration<double>(TransferMeter::Clock::now() - t).count();
}
}  // namespace

void TransferMeter::begin(Direction dir) {
  std::lock_guard lock(mu_);
  if (active_[dir]++ == 0) since_[dir] = Clock::now();
}

void TransferMeter::end(Direction dir, std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  (dir == kRead ? io_.read_bytes : io_.write_bytes) += bytes;
  if (--active_[dir] == 0) (dir == kRead ? io_.read_s : io_.write_s) += seconds_since(since_[dir]);
}

void TransferMeter::waited(Clock::time_point t) {
  const double s = seconds_since(t);
  std::lock_guard lock(mu_);
  io_.wait_s += s;
}

OffloadIo TransferMeter::io() const {
  std::lock_guard lock(mu_);
  return io_;
}

std::string TransferMeter::summary() const {
  const OffloadIo t = io();
  auto moved = [](std::uint64_t bytes, double s) {
    char text[96];
    std::snprintf(text, sizeof text, "%.1f MiB in %.3f s (%.0f MB/s)", static_cast<double>(bytes) / (1 << 20), s,
                  s > 0 ? static_cast<double>(bytes) / s / 1e6 : 0.0);
    return std::string(text);
  };
  char waited[64];
  std::snprintf(waited, sizeof waited, "; the training thread waited %.3f s for them", t.wait_s);
  return "read " + moved(t.read_bytes, t.read_s) + ", wrote " + moved(t.write_bytes, t.write_s) + waited;
}

}  // namespace zt::optim
