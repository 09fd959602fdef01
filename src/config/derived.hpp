// Values that follow from the configuration and the world size; computed once, after MPI is up.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"

namespace zt::config {

struct Derived {
  std::int64_t dp_size = 1;          // data-parallel ranks: world_size / (parallel.pp x parallel.tp)
  std::int64_t grad_accum = 1;       // global_batch = micro_batch x grad_accum x dp_size
  std::int64_t tokens_per_step = 0;  // global_batch x seq_len
};

// Throws ConfigError with the arithmetic and the nearest valid values if parallel.tp does not divide
// the world or the batch does not split over the data-parallel ranks (the ranks of one tensor-parallel
// group read the same sequences, so they count once).
Derived derive(const Config& config, std::int64_t world_size);

// The tensor-parallel degrees that divide every width tensor parallelism cuts whole (the heads, the K/V
// heads and the MLP width: model::check_tp_degree's rule) and, when ranks > 0, those ranks; ascending,
// 1 always among them. A refusal of parallel.tp on either rule names these, so that its values pass both.
std::vector<std::int64_t> tp_degrees(const ModelConfig& m, std::int64_t ranks = 0);

// What the trainer does not run with parallel.pp > 1 yet: throws ConfigError naming the key, the reason
// and the fix. nccl: the job communicates over NCCL (dist.backend, resolved). The run, --plan and the
// plan's fixes ask the same rule.
void check_pipeline_runs(const Config& c, bool nccl);
// The communicator a job on `device` uses: dist.backend, or its default there (auto: NCCL on CUDA, MPI on
// the CPU); uses_nccl says whether that is NCCL.
CommBackend comm_backend(const Config& c, Device device);
bool uses_nccl(const Config& c, Device device);

}  // namespace zt::config
