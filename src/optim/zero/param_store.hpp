// ZeRO-Infinity's parameter offload (train.offload=params): a stage-3 engine's slice of every unit's
// working parameters (the compute dtype) lives off the device, in host memory (offload.to=host) or in a
// file on a node-local NVMe disk (offload.to=nvme), and comes to the device one unit at a time: read into
// this rank's block of the unit's gathered buffer, which the all-gather then fills in place. So the
// device holds no parameter shard, only the gathered units in use (the plan's "gathered units" row).
//
// Updates (the optimizer step, loading) set each unit's slice in one pass over the units in shard order;
// finish_update() ends the pass. A pass sets every parameter element of the units it touches (the
// engine's pieces cover them); padding stays 0.
//
// NVMe layout: unit u's slice at slot_offset(u), every slot rounded up to 4 KiB, so that each read and
// write is one O_DIRECT transfer of a whole slice. Two read buffers: the unit about to be gathered is read
// ahead (prefetch) while the one before it computes; two write buffers: the unit being assembled by the
// step and the one being written behind it. Same choice of O_DIRECT and threads as nvme_store.hpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "optim/zero/offload_store.hpp"
#include "optim/zero/partition.hpp"

namespace zt::optim {

// What a store for one engine keeps off the device: host memory and the NVMe file (the planner's figures
// and the store's allocations both come from here).
struct ParamStoreFootprint {
  std::uint64_t host_bytes = 0, disk_bytes = 0;
};

class ParamStore {
 public:
  // file empty: host memory; else the NVMe tier's file (its directory prepared: offload.cpp's checks).
  static std::unique_ptr<ParamStore> make(const Partition& part, DType dtype, const std::filesystem::path& file);
  static ParamStoreFootprint footprint(const Partition& part, DType dtype, bool nvme);
  virtual ~ParamStore() = default;

  // Starts bringing unit u's slice to host memory ahead of read_unit(u) (NVMe; host memory has it).
  virtual void prefetch(int /*u*/) {}
  // Copies unit u's slice (shard_numel(u) elements of the dtype) to dst on `device`.
  virtual void read_unit(int u, backend::Backend& device, void* dst) = 0;
  // Sets elements [at, at + n) of this rank's shard (one unit's slice; shard order within a pass) to
  // `values` rounded to the dtype.
  virtual void update(std::int64_t at, std::int64_t n, const float* values) = 0;
  virtual void finish_update() {}

  virtual std::size_t host_bytes() const = 0;
  virtual std::uint64_t disk_bytes() const { return 0; }
  virtual OffloadIo io() const { return {}; }
};

}  // namespace zt::optim
