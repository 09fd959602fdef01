// Where ZeRO-Offload's state lives (offload.to): this rank's fp32 master weights and AdamW moments,
// [shard_numel] floats each in the shard layout (partition.hpp), in host memory or in a file on a
// node-local NVMe disk. The optimizer step streams the state chunk by chunk (for_each_chunk); loads,
// checkpoints and gathers read and write it by range.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace zt::optim {

enum class OffloadState { kMaster, kExpAvg, kExpAvgSq };

// What a store's transfers cost so far (the NVMe tier; zeros for host memory): bytes moved each way,
// the wall seconds a transfer of that direction was in flight, and the seconds the training thread
// waited for one (what the tier added to the step).
struct OffloadIo {
  std::uint64_t read_bytes = 0, write_bytes = 0;
  double read_s = 0, write_s = 0, wait_s = 0;
};

class OffloadStore {
 public:
  virtual ~OffloadStore() = default;

  // One chunk of the state: elements [offset, offset + numel) of the shard, the three arrays' host views
  // of it, valid during the call.
  struct Chunk {
    std::int64_t offset = 0, numel = 0;
    float *master = nullptr, *exp_avg = nullptr, *exp_avg_sq = nullptr;
  };
  // Calls update on every chunk in shard order; what it leaves in the views is the new state.
  virtual void for_each_chunk(const std::function<void(const Chunk&)>& update) = 0;
  // Elements [offset, offset + numel) of one array, to or from host memory.
  virtual void read(OffloadState state, std::int64_t offset, std::int64_t numel, float* out) = 0;
  virtual void write(OffloadState state, std::int64_t offset, std::int64_t numel, const float* src) = 0;

  virtual std::int64_t numel() const = 0;
  virtual std::int64_t chunk_numel() const = 0;  // the largest chunk for_each_chunk hands out
  virtual std::size_t host_bytes() const = 0;    // host memory the store holds
  virtual std::uint64_t disk_bytes() const { return 0; }
  virtual std::string where() const { return "host memory"; }
  virtual OffloadIo io() const { return {}; }
};

// The state in host memory, zeroed: one chunk, the whole shard.
std::unique_ptr<OffloadStore> make_host_store(std::int64_t numel);

}  // namespace zt::optim
