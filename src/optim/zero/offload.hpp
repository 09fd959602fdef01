// ZeRO-Offload (Ren et al. 2021) for train.offload=optimizer: this rank's fp32 master weights and
// AdamW moments live off the device, in host memory (offload.to=host) or in a file on a node-local NVMe
// disk (offload.to=nvme, ZeRO-Infinity's tier; nvme_store.hpp). Each step the reduced gradient slice
// comes to the host chunk by chunk, a multithreaded vectorised AdamW (the CPU backend's) updates the
// master there, and the updated parameters go back to the device (rounded to the compute dtype on the
// host, so bf16 moves half the bytes). The device then holds only parameters, gradients and
// activations; the host 12 bytes per owned parameter, or with NVMe a few chunk buffers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "io/direct_file.hpp"
#include "optim/zero/offload_store.hpp"
#include "optim/zero/param_store.hpp"
#include "optim/zero/partition.hpp"
#include "optim/zero/transfer_meter.hpp"

namespace zt::optim {

// The backend's AdamW arguments for one piece: weight decay only where the piece decays.
inline backend::Backend::AdamW adamw_hyperparams(const config::OptimConfig& o, double lr, int step_1based,
                                                 double grad_scale, bool decay) {
  return {static_cast<float>(lr), static_cast<float>(o.beta1), static_cast<float>(o.beta2), static_cast<float>(o.eps),
          decay ? static_cast<float>(o.weight_decay) : 0.0f, step_1based, static_cast<float>(grad_scale)};
}

// Where an engine's offloaded state goes. threads = 0: no optimizer offload.
struct OffloadOptions {
  int threads = 0;                  // host threads of the AdamW step
  std::filesystem::path nvme_file;  // empty: host memory; else the NVMe tier's file
  std::int64_t chunk_numel = 0;     // NVMe: elements per streamed chunk (NvmeStore::kChunkAlign multiple)
  // train.offload=params: a stage-3 engine's working parameters live off the device too (param_store.hpp),
  // in host memory or (params_file set) in the NVMe tier's file; also for a frozen engine (threads = 0).
  bool params = false;
  std::filesystem::path params_file;
};

// train.offload and offload.*: `name` tells an engine's files from another's on the same rank (the
// actor's, PPO's critic's, LoRA's frozen base's): offload.nvme_dir/rank_<world rank>/<name>.bin (the
// optimizer state) and <name>.params.bin. threads = 0: the engine has no optimizer to offload.
OffloadOptions offload_options(const config::Config& config, int threads, int world_rank, const std::string& name);

// offload.nvme_dir's checks before a file of the NVMe tier is created below it: the directory exists (a
// node-local disk's mount: creating a missing one would hide a typo or an unmounted disk by filling the
// root file system); rank_<r>/ below it is made. ConfigError (exit 2) naming the directory and the fix.
void prepare_nvme_dir(const std::filesystem::path& file);

// A store's file of the NVMe tier (NvmeStore, the parameter store): offload.nvme_dir named in its start-up
// errors, and a mid-run failure says what survives.
std::unique_ptr<io::DirectFile> open_nvme_file(const std::filesystem::path& file, std::uint64_t bytes);
// Its end, once the store's transfers are done: what they moved in the log (unless the run is failing),
// the file gone, and its rank_<r>/ too once empty (another store's file may still be there).
void close_nvme_file(std::unique_ptr<io::DirectFile>& file, const TransferMeter& meter, bool failing);

// What an engine whose shard holds shard_numel elements keeps off the device with `o` (o.threads > 0):
// host memory (the state and its gradient staging, or the NVMe tier's buffers) and the NVMe file.
// The planner's figures and OffloadOptimizer's allocations both come from here.
struct OffloadFootprint {
  std::uint64_t host_bytes = 0, disk_bytes = 0;
  std::uint64_t transfer_bytes = 0;  // NVMe: one chunk's read or write
};
OffloadFootprint offload_footprint(std::int64_t shard_numel, const OffloadOptions& o);

class OffloadOptimizer {
 public:
  // shard_numel: this rank's shard buffer length. NVMe start-up problems are ConfigError (exit 2).
  OffloadOptimizer(backend::Backend& device, std::int64_t shard_numel, const OffloadOptions& options);
  ~OffloadOptimizer();

  // One owned piece: where its working parameters (compute dtype; none with a ParamStore) and reduced
  // fp32 gradients are on the device.
  struct DevicePiece {
    ShardPiece piece;
    backend::Tensor param, grad;
  };
  // AdamW on the host for every piece (pieces in shard order), streamed through the store's chunks,
  // and the updated parameters back to the device, or (train.offload=params) into `params`.
  void step(const std::vector<DevicePiece>& pieces, const config::OptimConfig& o, double lr, int step_1based,
            double grad_scale, ParamStore* params = nullptr);

  // The state by shard range, host floats in and out (loads, checkpoints, gathers).
  void read(OffloadState state, std::int64_t offset, std::int64_t numel, float* out) { store_->read(state, offset, numel, out); }
  void write(OffloadState state, std::int64_t offset, std::int64_t numel, const float* src) {
    store_->write(state, offset, numel, src);
  }

  const OffloadStore& store() const { return *store_; }
  std::size_t host_bytes() const;  // the store's and the gradient staging (offload_footprint's)

 private:
  backend::Backend& device_;
  std::unique_ptr<backend::Backend> host_;  // the host AdamW
  std::unique_ptr<OffloadStore> store_;
  io::AlignedBuffer grad_;                  // one chunk of reduced gradients [chunk] f32, staged on the host
};

}  // namespace zt::optim
