// What each rank runs on, logged once at start-up as one table on rank 0 (host, device, driver,
// NCCL, network settings), so a job's log says which node and GPU a later message is about.
#pragma once

#include <string>

#include "dist/placement.hpp"
#include "dist/world.hpp"

namespace zt::dist {

// The CUDA device `device` as "NVIDIA H100 80GB HBM3 (0000:1b:00.0)" (name and PCI address); "cpu"
// where device < 0 or the build has no CUDA backend.
std::string device_description(int device);
// "driver CUDA 12.4, runtime 12.4, NCCL 2.21.5" (the CUDA version the driver supports); "" without CUDA.
std::string cuda_versions();

// "cpu", or "cuda:N " + device_description(N): what a rank computes on, for tables.
std::string rank_device(const Placement& placement);

// The network variables NCCL, UCX and Open MPI read that are set on this rank ("NCCL_IB_HCA=mlx5_0
// UCX_NET_DEVICES=mlx5_0:1"), or "" when none is: these pick the transport.
std::string network_environment();

// The inter-node transport NCCL is expected to pick on this rank, from NCCL_NET, NCCL_IB_DISABLE and
// the adapters in /sys/class/infiniband ("InfiniBand/RoCE (mlx5_0, mlx5_1)", "sockets (NCCL_IB_DISABLE=1)"):
// a guess from the same inputs NCCL reads first; only NCCL_DEBUG=INFO shows its real choice.
std::string nccl_expected_transport();

// Every rank calls (a gather on the world, whatever this rank's device): rank 0 logs one line per rank.
void log_rank_table(const World& world, const Placement& placement, const std::string& comm_name);

}  // namespace zt::dist
