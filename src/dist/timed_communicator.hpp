// A communicator that counts the wall time this rank spends blocked in collectives (issuing them and
// waiting for them), around any other. The straggler metrics subtract it from the phases' times:
// at ZeRO stages 2-3 the forward and backward passes contain collectives, where a fast rank waits for
// the slowest, so without it every rank's "compute" would look as slow as the straggler's.
// Host time only: on a device backend whose collectives complete on a stream (NCCL), the waiting
// happens in the phase's stream synchronisation and is not counted here.
#pragma once

#include <memory>

#include "dist/forwarding_communicator.hpp"

namespace zt::dist {

class TimedCommunicator final : public dist::ForwardingCommunicator {
 public:
  explicit TimedCommunicator(std::unique_ptr<dist::Communicator> inner);


  std::unique_ptr<dist::Work> all_reduce(dist::Span buffer, dist::ReduceOp op) override;
  std::unique_ptr<dist::Work> reduce_scatter(dist::Span send, dist::Span recv, dist::ReduceOp op) override;
  std::unique_ptr<dist::Work> all_gather(dist::Span send, dist::Span recv) override;
  std::unique_ptr<dist::Work> broadcast(dist::Span buffer, int root) override;
  std::unique_ptr<dist::Work> send(dist::Span buffer, int peer, int stream) override;
  std::unique_ptr<dist::Work> recv(dist::Span buffer, int peer, int stream) override;
  void barrier() override;
  void all_reduce_values(std::span<double> values, dist::ReduceOp op) override;
  // A timed child of the inner communicator's split; it counts its own blocked time (a caller timing
  // a step over several groups adds their blocked_ms()).
  std::unique_ptr<dist::Communicator> split(int color, int key) override;

  // Milliseconds blocked in collectives since construction.
  double blocked_ms() const { return blocked_ms_; }

 private:
  class TimedWork;
  template <typename F>
  auto timed(F f);  // runs f with this communicator's settings on the inner one, counting its time

  double blocked_ms_ = 0;
};

}  // namespace zt::dist
