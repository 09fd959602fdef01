// ztrain --preflight: before a job trains, measure what it will lean on, over the same ranks and
// launch: each rank's GEMM rate through the backend's matmul (bf16 on GPUs, fp32 on CPUs), the
// all-reduce, all-gather and reduce-scatter bus bandwidth over all ranks through the job's
// Communicator (NCCL on GPUs, MPI on CPUs), and every node pair's point-to-point bandwidth; each
// result is checked (nccl-tests' #wrong). Rank 0 prints a table and one JSON line (also written to
// preflight.out) and flags ranks and links below preflight.min_fraction of the median.
#pragma once

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/communicator.hpp"
#include "dist/placement.hpp"
#include "dist/world.hpp"

namespace zt::health {

// Every rank calls, with the backend and communicator the job would train with (train/wiring.hpp
// chooses them: train::run_preflight). Returns the job's exit code on every rank: 0 nothing flagged, 1
// a rank, link or result flagged (a finding about the hardware, as `zckpt verify` returns 1 for a
// problem found).
int run_preflight(const dist::World& world, const config::Config& config, const dist::Placement& placement,
                  backend::Backend& be, dist::Communicator& comm);

// preflight.out (rank 0 writes it after minutes of measuring) can be written: its directory exists and
// takes a file, and it is no directory. Else a ConfigError (exit 2) naming it and the fix, before any
// measurement. Nothing is created.
void check_preflight_out(const config::Config& config);

}  // namespace zt::health
