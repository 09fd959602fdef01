// dist.backend=mpi on a device backend: each collective copies its device spans to host memory, runs
// the MPI communicator there, and copies the result back. Slow (two PCIe copies per collective, no
// overlap) but it lets several ranks share one GPU, which NCCL refuses: how the multi-rank CUDA ZeRO
// paths run on a machine with one GPU (docs/ARCHITECTURE.md). With the CPU backend no staging is needed.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "dist/forwarding_communicator.hpp"

namespace zt::dist {

// What the staging needs of a device backend: copies each way. dist/ knows nothing of backends;
// train/wiring.cpp adapts the backend to this.
class DeviceCopies {
 public:
  virtual ~DeviceCopies() = default;
  virtual void to_host(void* host, const void* device, std::size_t bytes) = 0;    // host holds it on return
  virtual void to_device(void* device, const void* host, std::size_t bytes) = 0;  // host reusable on return
};

class StagedCommunicator final : public ForwardingCommunicator {
 public:
  // `device` is shared with the groups split from this one.
  StagedCommunicator(std::unique_ptr<Communicator> host, std::shared_ptr<DeviceCopies> device);

  std::string name() const override { return inner().name() + " (host-staged)"; }

  std::unique_ptr<Work> all_reduce(Span buffer, ReduceOp op) override;
  std::unique_ptr<Work> reduce_scatter(Span send, Span recv, ReduceOp op) override;
  std::unique_ptr<Work> all_gather(Span send, Span recv) override;
  std::unique_ptr<Work> broadcast(Span buffer, int root) override;
  // Through a host copy of their own, in flight like the MPI ones (a pipeline stage sends while its
  // neighbour sends back: blocking sends would wait on each other). A receive's data reaches the
  // device when its wait (or a done() that sees it complete) returns.
  std::unique_ptr<Work> send(Span buffer, int peer, int stream) override;
  std::unique_ptr<Work> recv(Span buffer, int peer, int stream) override;
  void barrier() override;
  void all_reduce_values(std::span<double> values, ReduceOp op) override;
  // The host communicator's split, staged through the same device backend.
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  Span to_host(const Span& device, std::vector<std::byte>& host);  // copies the data too
  void from_host(const Span& device, const std::vector<std::byte>& host);
  void finish(std::unique_ptr<Work> work);

  std::shared_ptr<DeviceCopies> device_;
  std::vector<std::byte> send_, recv_;
  class P2pWork;
};

}  // namespace zt::dist
