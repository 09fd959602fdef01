// What a node-local file's transfers cost (the NVMe tiers: nvme_store.hpp, param_store.hpp): bytes per
// direction, the wall seconds during which at least one transfer of that direction ran (two overlapping
// reads count once, so bytes / seconds is the rate the tier achieved, comparable with the disk's own),
// and the seconds the training thread waited for one.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "optim/zero/offload_store.hpp"

namespace zt::optim {

class TransferMeter {
 public:
  using Clock = std::chrono::steady_clock;
  enum Direction { kRead = 0, kWrite = 1 };

  // Runs transfer() (a pread or pwrite of `bytes`), counted also when it throws. Thread-safe.
  template <typename F>
  void timed(Direction dir, std::uint64_t bytes, F&& transfer) {
    begin(dir);
    struct End {
      TransferMeter& m;
      Direction dir;
      std::uint64_t bytes;
      ~End() { m.end(dir, bytes); }
    } end{*this, dir, bytes};
    transfer();
  }
  // The training thread waited since t for a transfer.
  void waited(Clock::time_point t);
  OffloadIo io() const;
  // "read 12.0 MiB in 0.010 s (1258 MB/s), wrote ...; the training thread waited 0.002 s for them"
  std::string summary() const;

 private:
  void begin(Direction dir);
  void end(Direction dir, std::uint64_t bytes);

  mutable std::mutex mu_;
  int active_[2] = {0, 0};
  Clock::time_point since_[2];
  OffloadIo io_;
};

}  // namespace zt::optim
