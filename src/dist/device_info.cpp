// The start-up table of ranks: the parts every build has (host, threads, network environment).
#include "dist/device_info.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <vector>

#include "core/log.hpp"

namespace zt::dist {

std::string network_environment() {
  // The variables that choose an interface or transport (docs/guide/clusters.md, "Network settings that matter").
  static const char* const kNames[] = {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA",     "NCCL_NET",       "NCCL_IB_DISABLE",
                                       "NCCL_P2P_DISABLE",   "NCCL_DEBUG",      "UCX_NET_DEVICES", "UCX_TLS",
                                       "OMPI_MCA_pml",       "OMPI_MCA_btl",    "OMPI_MCA_btl_tcp_if_include"};
  std::string out;
  for (const char* name : kNames)
    if (const char* v = std::getenv(name)) out += cat(out.empty() ? "" : " ", name, "=", v);
  return out;
}

std::string nccl_expected_transport() {
  if (const char* net = std::getenv("NCCL_NET"); net && *net) return cat(net, " (NCCL_NET)");
  if (const char* off = std::getenv("NCCL_IB_DISABLE"); off && std::string_view(off) == "1")
    return "sockets (NCCL_IB_DISABLE=1)";
  std::vector<std::string> adapters;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/infiniband", ec))
    adapters.push_back(e.path().filename().string());
  if (adapters.empty()) return "sockets (no /sys/class/infiniband adapters)";
  std::sort(adapters.begin(), adapters.end());
  std::string list;
  for (const std::string& a : adapters) list += cat(list.empty() ? "" : ", ", a);
  return cat("InfiniBand/RoCE (", list, ")");
}

std::string rank_device(const Placement& placement) {
  if (placement.device == config::Device::kCpu) return "cpu";
  return cat(placement.device_name(), " ", device_description(placement.device_index));
}

void log_rank_table(const World& world, const Placement& placement, const std::string& comm_name) {
  const std::string net = network_environment();
  const std::string versions = placement.device == config::Device::kCuda ? cuda_versions() : "";
  const std::string mine =
      cat("rank ", world.rank(), " on ", world.host(), " (local rank ", world.local_rank(), " of ", world.local_size(),
          "): ", rank_device(placement), versions.empty() ? "" : cat(", ", versions), ", ", placement.threads,
          " thread(s), collectives ", comm_name,
          comm_name == "nccl" ? cat(" (expected inter-node transport ", nccl_expected_transport(),
                                    "; NCCL_DEBUG=INFO shows the real choice)")
                              : "",
          net.empty() ? "" : cat(", ", net));
  const std::vector<std::string> lines = world.gather_to_root(mine);
  if (!world.is_root()) return;
  log::info(cat("ranks: ", world.size(), " on ", world.n_nodes(), " node(s)"));
  for (const std::string& line : lines) log::info(line);
}

}  // namespace zt::dist
