// One rank's model state under ZeRO stage 0-3 (Rajbhandari et al. 2020), written once over the
// Communicator for CPU+MPI and CUDA+NCCL alike:
//   stage 0: parameters, gradients and AdamW state replicated; gradients all-reduced in buckets.
//   stage 1: AdamW state (m, v; the fp32 master is this rank's slice of the parameters) sharded;
//            gradients reduce-scattered after the last micro-batch; updated slices all-gathered.
//   stage 2: gradients sharded too: each micro-batch's unit gradients are reduce-scattered as soon as
//            the backward pass finishes the unit, accumulated into the shard, and freed.
//   stage 3: parameters sharded too: each unit is all-gathered just before use (the next one
//            prefetched) and freed after; no gather after the optimizer step.
// Layout: stage 0 keeps the model's flat order; stages 1-3 pad every unit to a multiple of W
// (partition.hpp), so a unit's reduce-scatter and all-gather are single balanced collectives.
// Mixed precision (compute dtype X = bf16/f16): the parameters the model reads (replicated, gathered
// or sliced as above) are X working copies; the fp32 master of this rank's slice is a separate shard
// (or lives off the device with offload, offload.hpp), which AdamW updates while writing the X copy in the same pass;
// gradients are fp32 everywhere (reduced in fp32, or at stages 2-3 in X with ZeroOptions::reduce_in_compute);
// all-gathers move X (half the bytes of fp32).
// Transient buffers (stages 2-3: unit gradients and their reductions; stage 3: gathered units) come from
// the backend and go back to it when done (the CUDA backend's caching allocator reuses them in the next
// step); transients.hpp replays their life without allocating, for the planner.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/communicator.hpp"
#include "optim/zero/offload.hpp"
#include "optim/zero/param_store.hpp"
#include "optim/zero/partition.hpp"

namespace zt::optim {

// How the engine bounds and shapes its transient buffers: the zero.* keys (config.hpp).
struct ZeroOptions {
  // Stage 0: gradients are all-reduced in buckets of this many MiB. Stages 2-3: at most two unit
  // gradients stay in reduction (with their reduced slices), and only one where two would exceed this
  // many MiB: the oldest is completed before the backward goes on.
  double bucket_mb = 25;
  // Stages 2-3 in mixed precision: each finished unit gradient is rounded to the compute dtype, reduce-
  // scattered in it, and its slice accumulated into the fp32 shard (the fp32 unit gradient is freed at once).
  bool reduce_in_compute = false;
  // Stages 2-3: GradSink::unit_part_done reduces the contributions so far (a tied head's share of the
  // embedding's gradient) instead of holding the unit's gradient until the pass is done with it.
  bool reduce_tied_early = true;
  // The zero.* keys; zero.reduce_tied_early=auto as false (decoder_zero_options resolves it for a model).
  static ZeroOptions from(const config::ZeroConfig& c);

  // The rules the engine applies and transients.hpp replays, written once for both:
  std::size_t bucket_bytes() const { return static_cast<std::size_t>(bucket_mb * 1024 * 1024); }
  // The dtype unit gradients are reduce-scattered in, for a run whose compute dtype is `compute`.
  DType reduce_dtype(DType compute) const { return reduce_in_compute && compute != DType::kF32 ? compute : DType::kF32; }
  // Stages 2-3: whether the oldest of `count` reductions in flight, `bytes` in all, completes before the
  // backward goes on (at most kMaxInFlight; one where two exceed the bucket).
  bool completes_oldest(std::size_t count, std::size_t bytes, std::size_t max_in_flight) const {
    return count > 1 && (count > max_in_flight || bytes > bucket_bytes());
  }
};

// A transient buffer's bytes (never 0: an empty unit still gets a one-element buffer).
inline std::size_t transient_bytes(std::int64_t numel, DType dtype) {
  return static_cast<std::size_t>(std::max<std::int64_t>(1, numel)) * dtype_size(dtype);
}

// Bytes this rank holds for the model state, by kind (printed at start-up, checked by tests).
struct MemoryBreakdown {
  std::size_t params = 0, grads = 0, optimizer = 0, comm_buffers_peak = 0;
  std::size_t host_optimizer = 0;  // ZeRO-Offload: master + moments in host memory, or the NVMe tier's buffers
  std::uint64_t nvme_optimizer = 0;  // ZeRO-Offload to NVMe: the state's file
  std::size_t host_params = 0;       // train.offload=params: the parameter shard, or the NVMe tier's buffers
  std::uint64_t nvme_params = 0;     // ... on NVMe: the shard's file
  std::size_t model_state() const { return params + grads + optimizer; }
};

class ZeroEngine {
 public:
  // Stages 2-3: unit reductions in flight at most. Two overlap one unit's reduction with the next unit's
  // backward; more would only hold finished reductions' buffers longer.
  static constexpr std::size_t kMaxInFlight = 2;

  // offload.threads > 0: ZeRO-Offload (offload.hpp): the fp32 master, the AdamW moments and the
  // optimizer step live on the host (the state in memory or on NVMe), run by that many threads; the
  // device holds no optimizer state. offload.params at stage 3 (param_store.hpp): nor the parameter
  // shard, which each unit's gather reads from the host or NVMe.
  // compute: the dtype of the parameters handed to the model (f32, bf16 or f16).
  // frozen: parameters only (LoRA's base): held in the compute dtype, replicated at stages 0-2 and
  // sharded and gathered per unit at stage 3 as any parameter, with no gradient, master or optimizer
  // state; load_params sets them, and asking for gradients or a step is an error.
  ZeroEngine(backend::Backend& backend, dist::Communicator& comm, std::vector<FlatRange> units,
             std::vector<ParamRange> params, int stage, const ZeroOptions& options = {},
             const OffloadOptions& offload = {}, DType compute = DType::kF32, bool frozen = false);
  ~ZeroEngine();

  backend::Backend& backend() const { return backend_; }
  int stage() const { return stage_; }
  bool frozen() const { return frozen_; }
  DType compute_dtype() const { return dtype_; }
  const Partition& partition() const { return part_; }

  // Sets the parameters from a full flat copy in the model's order (host memory).
  void load_params(const float* flat_host);
  // Sets the parameters range by range: fill(offset, count, out) writes flat elements
  // [offset, offset + count) to out. Stage 3 asks only for this rank's slices (no full copy).
  void load_params(const std::function<void(std::int64_t, std::int64_t, float*)>& fill);
  // Copies the full fp32 parameters (the master where it is separate) in the model's order to host
  // memory; a collective where gather_is_collective(): every rank calls it then.
  // flat_host may be null on a rank that only joins the collective (its values are not wanted).
  void gather_params(float* flat_host);
  // The same for unit u alone (partition().unit(u): its values to unit_host, of its numel; null: joined only).
  // Every rank gathers the same units in the same order where gather_is_collective().
  void gather_unit_params(int u, float* unit_host);
  bool gather_is_collective() const { return stage_ == 3 || (mixed() && stage_ >= 1); }
  // ZeRO-Offload: the master and moments live off the device (host memory or NVMe), not in its buffers.
  bool offloads() const { return offload_ != nullptr; }
  // train.offload=params: the stage-3 parameter shard lives off the device too.
  bool offloads_params() const { return param_store_ != nullptr; }

  // ---- checkpoint state: the fp32 master weights and AdamW moments by flat range ----------------
  using State = OffloadState;  // the same three arrays wherever they live (offload_store.hpp)
  // Whether this rank holds `state` for flat elements [range): the master of any range at stages
  // 0-2 in fp32 without offload, the moments of any range at stage 0; otherwise only inside this rank's
  // own slices. Every range the W-rank partition gives this rank qualifies, whatever the stage and
  // precision. range: inside one unit.
  bool holds(State state, const FlatRange& range) const;
  // Copies `state` over range (which this rank holds) to host memory: range.numel floats.
  void copy_state_to_host(State state, const FlatRange& range, float* out) const;
  // Sets the AdamW moments this rank holds, range by range as load_params: fill(state, offset,
  // count, out) writes elements [offset, offset + count) of exp_avg or exp_avg_sq to out.
  void load_moments(const std::function<void(State, std::int64_t, std::int64_t, float*)>& fill);

  // ---- what the model reads and writes, unit by unit -------------------------------------------
  // access_order: the units in the order the next pass will ask for them (stage 3 prefetches).
  void expect_access_order(std::vector<int> access_order);
  backend::Tensor param_unit(int u);   // [unit numel] in the compute dtype, valid until release_param_unit(u)
  void release_param_unit(int u);
  backend::Tensor grad_unit(int u);    // [unit numel] f32 to accumulate into (+=)
  void grad_unit_done(int u);          // the backward pass has finished unit u
  // The pass has added one share of unit u's gradient (a tied head's to the embedding) and will add more
  // after a fresh grad_unit(u): stages 2-3 reduce the share now (ZeroOptions::reduce_tied_early).
  void grad_unit_part_done(int u);

  // ---- one optimizer step -----------------------------------------------------------------------
  void zero_grads();
  // Before each micro-batch's backward: whether it is the step's last (stages 0-1 reduce only then).
  void begin_backward(bool last_micro_batch);
  void end_backward();
  // Waits for every reduction; returns the global gradient L2 norm (before clipping).
  double finish_gradients();
  // After finish_gradients: the squared L2 norm of the reduced gradients over the flat elements of
  // `ranges` (model order), summed over the group. Tensor parallelism counts its replicated
  // parameters once over the TP group with it (train/tp_wiring.hpp).
  double grad_sum_of_squares(const std::vector<FlatRange>& ranges);
  // AdamW on this rank's shard (decay per parameter), then the all-gather of updated slices (1-2).
  void adamw_step(const config::OptimConfig& optim, double lr, int step_1based, double grad_scale);

  MemoryBreakdown memory() const;

 private:
  struct Pending;
  // One owned piece with its device views: the working parameters (X), gradients and master (f32).
  struct Piece {
    ShardPiece piece;
    backend::Tensor param, grad, master;
  };
  bool mixed() const { return dtype_ != DType::kF32; }
  backend::Tensor fview(const backend::Buffer& b, std::int64_t offset, std::int64_t numel) const;  // f32
  backend::Tensor pview(const backend::Buffer& b, std::int64_t offset, std::int64_t numel) const;  // compute dtype
  // Where elements [range) of unit u (inside this rank's slice) sit in the shard buffers.
  std::int64_t shard_position(int u, const FlatRange& range) const;
  // The separate fp32 master or a moment over `numel` elements at shard position `at`, to and from host
  // floats: on the device, or in the offload store (host memory or NVMe) with offload.
  void read_state(State state, std::int64_t at, std::int64_t numel, float* out) const;
  void write_state(State state, std::int64_t at, std::int64_t numel, const float* src);
  const backend::Buffer& state_buffer(State state) const;  // the device's master_, exp_avg_ or exp_avg_sq_
  bool separate_master() const { return mixed() || offload_ != nullptr; }
  std::int64_t full_offset(int u) const;  // where unit u starts in the full parameter/gradient layout
  backend::Tensor owned_grads(int u) const;  // this rank's reduced gradient slice of unit u (stages 1-3)
  int unit_of(const FlatRange& range) const;  // the unit holding range, or -1 if it spans units
  int held_unit(State state, const FlatRange& range) const;  // unit_of(range), after checking holds()
  void launch_gather(int u);
  void flush_bucket();
  void reduce_unit(int u);
  void complete_oldest(bool accumulate);
  void drain(bool accumulate);
  std::size_t in_flight_bytes() const;
  DType reduce_dtype() const { return options_.reduce_dtype(dtype_); }
  // A transient buffer from the backend, counted in comm_bytes_ until release_transient.
  backend::Buffer take_transient(std::int64_t numel, DType dtype);
  void release_transient(backend::Buffer& b);

  backend::Backend& backend_;
  dist::Communicator& comm_;
  int stage_;
  DType dtype_;
  bool frozen_ = false;
  ZeroOptions options_;
  Partition part_;  // W-rank partition (stage 0: a one-rank partition: nothing padded, all owned)
  backend::Buffer full_params_, full_grads_;            // stages 0-2 / stages 0-1
  backend::Buffer param_shard_, grad_shard_, exp_avg_, exp_avg_sq_;
  backend::Buffer master_;  // mixed precision without offload: this rank's fp32 master (shard layout)
  std::unique_ptr<OffloadOptimizer> offload_;  // ZeRO-Offload; then exp_avg_/exp_avg_sq_/master_ stay empty
  std::unique_ptr<ParamStore> param_store_;    // train.offload=params (stage 3); then param_shard_ stays empty
  void prefetch_slice_after(int u);            // reads ahead the slice of the unit expected after u
  std::vector<Piece> pieces() const;
  bool reducing_ = false;
  std::vector<int> bucket_units_;
  std::size_t bucket_pending_bytes_ = 0;
  std::deque<std::unique_ptr<Pending>> in_flight_;
  std::map<int, backend::Buffer> gathered_, grad_temp_;  // stage 3 params / stage 2-3 unit gradients
  std::map<int, std::unique_ptr<dist::Work>> gathers_;
  std::vector<int> access_order_;
  std::size_t access_pos_ = 0;
  std::size_t comm_bytes_ = 0, comm_bytes_peak_ = 0;
};

}  // namespace zt::optim
