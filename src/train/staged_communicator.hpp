// dist.backend=mpi on a device backend: each collective copies its device spans to host memory, runs
// the MPI communicator there, and copies the result back. Slow (two PCIe copies per collective, no
// overlap) but it lets several ranks share one GPU, which NCCL refuses: how the multi-rank CUDA ZeRO
// paths run on a machine with one GPU (docs/ARCHITECTURE.md). With the CPU backend no staging is needed.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "dist/forwarding_communicator.hpp"

namespace zt::train {

class StagedCommunicator final : public dist::ForwardingCommunicator {
 public:
  StagedCommunicator(std::unique_ptr<dist::Communicator> host, backend::Backend& device);

  std::string name() const override { return inner().name() + " (host-staged)"; }

  std::unique_ptr<dist::Work> all_reduce(dist::Span buffer, dist::ReduceOp op) override;
  std::unique_ptr<dist::Work> reduce_scatter(dist::Span send, dist::Span recv, dist::ReduceOp op) override;
  std::unique_ptr<dist::Work> all_gather(dist::Span send, dist::Span recv) override;
  std::unique_ptr<dist::Work> broadcast(dist::Span buffer, int root) override;
  // Through a host copy of their own, in flight like the MPI ones (a pipeline stage sends while its
  // neighbour sends back: blocking sends would wait on each other). A receive's data reaches the
  // device when its wait (or a done() that sees it complete) returns.
  std::unique_ptr<dist::Work> send(dist::Span buffer, int peer) override;
  std::unique_ptr<dist::Work> recv(dist::Span buffer, int peer) override;
  void barrier() override;
  void all_reduce_values(std::span<double> values, dist::ReduceOp op) override;
  // The host communicator's split, staged through the same device backend.
  std::unique_ptr<dist::Communicator> split(int color, int key) override;

 private:
  dist::Span to_host(const dist::Span& device, std::vector<std::byte>& host);  // copies the data too
  void from_host(const dist::Span& device, const std::vector<std::byte>& host);
  void finish(std::unique_ptr<dist::Work> work);

  backend::Backend& device_;
  std::vector<std::byte> send_, recv_;
  class P2pWork;
};

}  // namespace zt::train
