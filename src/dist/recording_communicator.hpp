// A communicator that records every collective it passes on into this rank's flight recorder
// (dist/collective_ring.hpp), as group "dp" with its communicator's label: entered when issued, left when its wait (or a done()
// poll) sees it complete, marked timed out when the wait throws. Around any other communicator, so no
// collective path of the training loop is missed; the world's agreements record themselves
// (World::record_into).
#pragma once

#include <memory>

#include "dist/collective_ring.hpp"
#include "dist/forwarding_communicator.hpp"

namespace zt::dist {

class RecordingCommunicator final : public dist::ForwardingCommunicator {
 public:
  // `label`: this communicator's in the ring's records (0 for the root; split_label for a split's).
  RecordingCommunicator(std::unique_ptr<dist::Communicator> inner, dist::CollectiveRing& ring, std::uint32_t label = 0);


  std::unique_ptr<dist::Work> all_reduce(dist::Span buffer, dist::ReduceOp op) override;
  std::unique_ptr<dist::Work> reduce_scatter(dist::Span send, dist::Span recv, dist::ReduceOp op) override;
  std::unique_ptr<dist::Work> all_gather(dist::Span send, dist::Span recv) override;
  std::unique_ptr<dist::Work> broadcast(dist::Span buffer, int root) override;
  // Recorded in their own group (p2p, its own sequence: stages run different programs), with the peer
  // in the context, so a hang report shows which stage's send or receive never completed.
  std::unique_ptr<dist::Work> send(dist::Span buffer, int peer, int stream) override;
  std::unique_ptr<dist::Work> recv(dist::Span buffer, int peer, int stream) override;
  void barrier() override;
  void all_reduce_values(std::span<double> values, dist::ReduceOp op) override;
  // The split itself is recorded (a barrier over this group), and the child records into the same ring
  // and sequence under its own label: the trainer's TP and DP groups (parallel.tp) run the same program
  // on every rank of a stage, so collective #n is the same call on every member of a communicator, and
  // the hang report compares a waiter only with the ranks of the communicator it waits in.
  std::unique_ptr<dist::Communicator> split(int color, int key) override;

 private:
  class RecordedWork;
  template <typename F>
  std::unique_ptr<dist::Work> recorded(dist::CollKind kind, std::size_t bytes, F issue,
                                       dist::CollGroup group = dist::CollGroup::kDp, const std::string& detail = "");

  dist::CollectiveRing& ring_;
  std::uint32_t label_ = 0;
  std::uint32_t splits_ = 0;  // splits made so far (split_label's index)
};

}  // namespace zt::dist
