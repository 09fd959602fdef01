// The memory plan's model-state rows (plan_rows.hpp): parameters, gradients, optimizer state, ZeRO 2-3's
// transient buffers, ZeRO-Offload's rows off the device, LoRA's frozen base.
#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "optim/zero/param_store.hpp"
#include "plan/plan_rows.hpp"

namespace zt::plan {

optim::Partition partition_of(const model::ParamTable& t, std::int64_t world, int stage,
                              const std::vector<optim::FlatRange>& units) {
  const std::int64_t w = stage == 0 ? 1 : world;  // stage 0 replicates: no padding
  return optim::Partition(units.empty() ? optim::units_of(t) : units, {}, static_cast<int>(w), 0);
}

std::int64_t data_parallel_ranks(const config::Config& config, std::int64_t world) {
  return std::max<std::int64_t>(1, world / (config.parallel.tp * config.parallel.pp));
}

std::shared_ptr<const model::ParamTable> whole_table(const model::GptShape& shape) {
  thread_local std::shared_ptr<const model::ParamTable> last;
  if (!last || !(last->shape() == shape)) last = std::make_shared<const model::ParamTable>(shape);
  return last;
}

std::string mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

EnginePass decoder_pass(const model::GptShape& s, const optim::EngineUnits& units) {
  return {optim::forward_backward_order(s.n_layer, s.tie_embeddings, units),
          optim::decoder_calls(s.n_layer, s.tie_embeddings, true, units), true, s.tie_embeddings, s.n_layer,
          units.pieced() ? units.ranges : std::vector<optim::FlatRange>{}};
}
EnginePass adapter_pass(const model::GptShape& s) {
  return {optim::adapter_access_order(s.n_layer, true), optim::adapter_calls(s.n_layer, true)};
}

std::int64_t gathers_per_step(const config::Config& c, std::int64_t dp) {
  const std::int64_t per_micro = std::max<std::int64_t>(1, c.train.micro_batch * dp);
  return 2 * std::max<std::int64_t>(1, c.train.global_batch / per_micro);
}

namespace {

// ZeRO-Offload's rows off the device for a shard of `shard` elements (the engine named `name`'s file).
// x: the compute dtype's bytes (the updated working parameters go back to the device in it; 0: they stay
// off it, train.offload=params).
void add_offload_rows(MemoryPlan& p, std::uint64_t shard, std::uint64_t x, const optim::OffloadOptions& o,
                      const std::string& prefix) {
  const optim::OffloadFootprint f = optim::offload_footprint(static_cast<std::int64_t>(shard), o);
  p.host_bytes += f.host_bytes;
  if (o.nvme_file.empty()) {
    p.offload_rows.push_back({prefix + "host: optimizer state", f.host_bytes,
                              "offload.to=host: fp32 master, AdamW m and v of the rank's slice, gradient staging"});
    p.offload_rows.push_back({prefix + "PCIe traffic per step", shard * (sizeof(float) + x),
                              x > 0 ? "the fp32 gradient slice to the host, the updated parameters back in the compute dtype"
                                    : "the fp32 gradient slice to the host (the updated parameters stay there: train.offload=params)"});
    return;
  }
  const std::string file = (o.nvme_file.parent_path().parent_path() / "rank_<r>" / o.nvme_file.filename()).string();
  p.offload_rows.push_back({prefix + "host: NVMe buffers", f.host_bytes,
                            cat("offload.to=nvme: 3 chunks of ", mib(f.transfer_bytes), " (read ahead, updating, written "
                                "behind), gradient staging, an access window")});
  p.nvme_bytes += f.disk_bytes;
  p.offload_rows.push_back({prefix + "NVMe file", f.disk_bytes,
                            cat(file, ", preallocated: fp32 master, AdamW m and v of the rank's slice")});
  p.offload_rows.push_back({prefix + "NVMe traffic per step", 2 * f.disk_bytes,
                            cat("the file read and written once a step (", mib(f.disk_bytes), " each way): the step "
                                "waits on the disk where that takes longer than the host AdamW")});
}

// train.offload=params' rows off the device for a stage-3 engine over `part` (param_store.hpp): the
// shard in host memory, or on NVMe with four slice buffers; each gather reads its unit's slice from there
// (gathers: how many times a step gathers every unit), the step writes the updated shard back.
void add_param_offload_rows(MemoryPlan& p, const optim::Partition& part, DType compute, const optim::OffloadOptions& o,
                            std::int64_t gathers, const std::string& prefix) {
  const bool nvme = !o.params_file.empty();
  const optim::ParamStoreFootprint f = optim::ParamStore::footprint(part, compute, nvme);
  const std::uint64_t shard = part.total_shard_numel() * dtype_size(compute);
  const std::string xs(dtype_name(compute));
  p.host_bytes += f.host_bytes;
  p.offload_rows.push_back({prefix + "PCIe per step, params", shard * static_cast<std::uint64_t>(gathers),
                            cat("each unit's ", xs, " slice up to the device before each of its ", gathers,
                                " gathers a step (forward and backward of each micro-batch)")});
  if (!nvme) {
    p.offload_rows.push_back({prefix + "host: parameters", f.host_bytes,
                              cat("train.offload=params, offload.to=host: the ", xs, " 1/W slice of each unit")});
    return;
  }
  const std::string file = (o.params_file.parent_path().parent_path() / "rank_<r>" / o.params_file.filename()).string();
  p.offload_rows.push_back({prefix + "host: NVMe param bufs", f.host_bytes,
                            "4 slices of the largest unit: 2 read ahead of their gathers, 2 written behind the step"});
  p.nvme_bytes += f.disk_bytes;
  p.offload_rows.push_back({prefix + "NVMe file, parameters", f.disk_bytes,
                            cat(file, ", preallocated: the ", xs, " 1/W slice of each unit, 4 KiB-aligned")});
  p.offload_rows.push_back({prefix + "NVMe per step, params", f.disk_bytes * static_cast<std::uint64_t>(gathers + 1),
                            cat("the file read at each of the ", gathers, " gathers of every unit and written once by the step")});
}

}  // namespace

void add_model_state(MemoryPlan& p, const model::ParamTable& table, std::int64_t world, int stage, DType compute,
                     const optim::OffloadOptions& offload, const config::ZeroConfig& zero_config, const EnginePass& pass,
                     std::int64_t gathers, const std::string& prefix) {
  const bool offloaded = offload.threads > 0, params_offloaded = offload.params && stage == 3;
  const optim::Partition part = partition_of(table, world, stage, pass.units);
  const std::uint64_t x = dtype_size(compute), f = sizeof(float);
  const std::uint64_t full = part.total_padded_numel(), shard = part.total_shard_numel();
  const bool mixed = compute != DType::kF32;
  const std::string xs(dtype_name(compute));
  std::uint64_t params = (stage <= 2 ? full : shard) * x;
  std::string note = stage <= 2 ? xs + ", replicated" : xs + ", 1/W slice of each unit";
  if (mixed && !offloaded) {
    params += shard * f;
    note += stage == 0 ? " + fp32 master, replicated" : " + fp32 master of the 1/W slice";
  }
  if (params_offloaded) {
    params = 0;
    note = cat("offloaded (train.offload=params) to ", offload.params_file.empty() ? "host memory" : "NVMe", ": below");
  }
  p.rows.push_back({prefix + "parameters", params, note});
  p.rows.push_back({prefix + "gradients", (stage <= 1 ? full : shard) * f, stage <= 1 ? "fp32, full" : "fp32, 1/W slice"});
  p.rows.push_back({prefix + "optimizer state", offloaded ? 0 : 2 * shard * f,
                    offloaded ? cat("offloaded (train.offload=optimizer) to ", offload.nvme_file.empty() ? "host memory" : "NVMe",
                                    ": below, with the master")
                              : stage == 0 ? "AdamW m and v, replicated" : "AdamW m and v, 1/W slice"});
  if (offloaded) add_offload_rows(p, shard, params_offloaded ? 0 : x, offload, prefix);
  if (params_offloaded) add_param_offload_rows(p, part, compute, offload, gathers, prefix);
  if (stage < 2) return;
  const optim::ZeroOptions zero = pass.decoder ? optim::decoder_zero_options(zero_config, part, stage, compute, pass.n_layer, pass.tied)
                                               : optim::ZeroOptions::from(zero_config);
  const std::uint64_t transient = optim::transient_peak_bytes(part, stage, compute, zero, false, pass.order, pass.calls);
  std::string what = cat("the fp32 unit gradient being summed and two in reduction (one where two exceed zero.bucket_mb, ",
                         zero.reduce_in_compute && mixed ? xs : "fp32", ") with their reduced slices");
  if (pass.tied) what += zero.reduce_tied_early ? "; the tied head's share reduced early" : "; the tied head's share held to the end";
  if (stage == 3) what += "; the gathered parameter unit in use and the prefetched next";
  if (!pass.units.empty()) what += "; the token embedding and the LM head in units of the loss's chunks (zero.split_vocab)";
  // Transient: a step's (PPO's critic steps before the actor, never with it).
  p.rows.push_back({prefix + (prefix.empty() ? "communication buffers" : "comm buffers"), transient, what,
                    prefix == "critic " ? Phase::kCriticUpdate : Phase::kUpdate});
}

void add_frozen_base(MemoryPlan& p, const model::ParamTable& base, std::int64_t world, int stage, DType compute,
                     const std::optional<model::Nf4Options>& nf4, const optim::ZeroOptions& zero,
                     const optim::OffloadOptions& offload, std::int64_t gathers,
                     const std::vector<model::UnitPieces>& pieces) {
  const std::vector<model::UnitPieces> split = stage == 3 ? pieces : std::vector<model::UnitPieces>{};
  const optim::EngineUnits units = optim::engine_units(base, split);
  const std::string split_note = split.empty() ? "" : "; the token embedding and the LM head in units of the loss's chunks (zero.split_vocab)";
  if (nf4) {
    const int shards = stage == 3 ? static_cast<int>(world) : 1;
    p.rows.push_back({"frozen base", model::nf4_held_bytes(base, compute, *nf4, shards, split),
                      cat("NF4 blocks of ", nf4->block, nf4->double_quant ? " (double quantization)" : "", ": the blocks' ",
                          "matmul weights as 4-bit codes + scales, the rest ", dtype_name(compute),
                          shards > 1 ? "; 1/W of each unit's bytes" : "; replicated")});
    if (shards == 1) {
      p.rows.push_back({"dequantized base unit", model::nf4_unit_scratch_bytes(base, compute, *nf4),
                        cat("the block in use, ", dtype_name(compute))});
      return;
    }
    const std::vector<int> order = optim::forward_backward_order(base.shape().n_layer, base.shape().tie_embeddings, units);
    p.rows.push_back({"gathered base units", model::nf4_sharded_transient_bytes(base, compute, *nf4, shards, order, split),
                      cat("the unit in use (a block dequantized, ", dtype_name(compute),
                          ") and the prefetched next one's quantized bytes", split_note),
                      Phase::kUpdate});
    return;
  }
  const optim::Partition part = partition_of(base, world, stage == 3 ? 3 : 0, stage == 3 ? units.ranges : std::vector<optim::FlatRange>{});
  const std::uint64_t x = dtype_size(compute);
  const std::string xs(dtype_name(compute));
  if (stage < 3) {
    p.rows.push_back({"frozen base", part.total_padded_numel() * x, xs + ", replicated; no gradient, master or optimizer state"});
    return;
  }
  if (offload.params) {
    p.rows.push_back({"frozen base", 0, cat("offloaded (train.offload=params) to ", offload.params_file.empty() ? "host memory" : "NVMe",
                                            ": below; no gradient, master or optimizer state")});
    add_param_offload_rows(p, part, compute, offload, gathers, "base ");
  } else {
    p.rows.push_back({"frozen base", part.total_shard_numel() * x, xs + ", 1/W slice of each unit; no gradient, master or optimizer state"});
  }
  const EnginePass pass = decoder_pass(base.shape(), units);
  p.rows.push_back({"gathered base units", optim::transient_peak_bytes(part, 3, compute, zero, true, pass.order, pass.calls),
                    "the unit in use and the prefetched next" + split_note, Phase::kUpdate});
}

}  // namespace zt::plan
