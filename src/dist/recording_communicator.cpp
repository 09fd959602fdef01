// Flight recording around a communicator (recording_communicator.hpp).
#include "dist/recording_communicator.hpp"

#include <exception>

#include "core/error.hpp"

namespace zt::dist {
namespace {
}  // namespace

// Leaves the ring entry once the inner operation is seen complete; a wait that throws (the deadline)
// marks it timed out, so the notes show where this rank gave up.
class RecordingCommunicator::RecordedWork final : public dist::Work {
 public:
  RecordedWork(std::unique_ptr<dist::Work> inner, RecordingCommunicator& owner, dist::CollectiveRing::Ticket ticket)
      : inner_(std::move(inner)), owner_(owner), ticket_(ticket) {}
  // Dropped unwaited in normal flow: nobody waits in it any more (unwinding keeps it open, as it is).
  ~RecordedWork() override {
    if (std::uncaught_exceptions() == 0) owner_.ring_.leave(ticket_);
  }
  void wait() override {
    owner_.pass_settings();
    try {
      inner_->wait();
    } catch (...) {
      owner_.ring_.leave(ticket_, dist::CollState::kTimedOut);
      throw;
    }
    owner_.ring_.leave(ticket_);
  }
  bool done() override {
    if (!inner_->done()) return false;
    owner_.ring_.leave(ticket_);
    return true;
  }

 private:
  std::unique_ptr<dist::Work> inner_;
  RecordingCommunicator& owner_;
  dist::CollectiveRing::Ticket ticket_;
};

RecordingCommunicator::RecordingCommunicator(std::unique_ptr<dist::Communicator> inner, dist::CollectiveRing& ring,
                                             std::uint32_t label)
    : ForwardingCommunicator(std::move(inner)), ring_(ring), label_(label) {}

template <typename F>
std::unique_ptr<dist::Work> RecordingCommunicator::recorded(dist::CollKind kind, std::size_t bytes, F issue,
                                                            dist::CollGroup group, const std::string& detail) {
  pass_settings();
  const dist::CollectiveRing::Ticket ticket =
      ring_.enter(group, kind, bytes, detail.empty() ? context() : cat(context(), ", ", detail), label_);
  std::unique_ptr<dist::Work> work;
  try {
    work = issue(inner());
  } catch (...) {
    ring_.leave(ticket, dist::CollState::kTimedOut);
    throw;
  }
  copy_stats();
  return std::make_unique<RecordedWork>(std::move(work), *this, ticket);
}

std::unique_ptr<dist::Work> RecordingCommunicator::all_reduce(dist::Span buffer, dist::ReduceOp op) {
  return recorded(dist::CollKind::kAllReduce, buffer.bytes(), [&](dist::Communicator& c) { return c.all_reduce(buffer, op); });
}

std::unique_ptr<dist::Work> RecordingCommunicator::reduce_scatter(dist::Span send, dist::Span recv, dist::ReduceOp op) {
  return recorded(dist::CollKind::kReduceScatter, send.bytes(),
                  [&](dist::Communicator& c) { return c.reduce_scatter(send, recv, op); });
}

std::unique_ptr<dist::Work> RecordingCommunicator::all_gather(dist::Span send, dist::Span recv) {
  return recorded(dist::CollKind::kAllGather, recv.bytes(), [&](dist::Communicator& c) { return c.all_gather(send, recv); });
}

std::unique_ptr<dist::Work> RecordingCommunicator::broadcast(dist::Span buffer, int root) {
  return recorded(dist::CollKind::kBroadcast, buffer.bytes(), [&](dist::Communicator& c) { return c.broadcast(buffer, root); });
}

std::unique_ptr<dist::Work> RecordingCommunicator::send(dist::Span buffer, int peer, int stream) {
  return recorded(dist::CollKind::kSend, buffer.bytes(), [&](dist::Communicator& c) { return c.send(buffer, peer, stream); },
                  dist::CollGroup::kP2p, cat("to rank ", peer, " of ", size()));
}

std::unique_ptr<dist::Work> RecordingCommunicator::recv(dist::Span buffer, int peer, int stream) {
  return recorded(dist::CollKind::kRecv, buffer.bytes(), [&](dist::Communicator& c) { return c.recv(buffer, peer, stream); },
                  dist::CollGroup::kP2p, cat("from rank ", peer, " of ", size()));
}

// The blocking ones complete (or throw) before they return: one scope each.
void RecordingCommunicator::barrier() {
  pass_settings();
  const dist::RingScope recorded(&ring_, dist::CollGroup::kDp, dist::CollKind::kBarrier, 0, context(), label_);
  inner().barrier();
  copy_stats();
}

void RecordingCommunicator::all_reduce_values(std::span<double> values, dist::ReduceOp op) {
  pass_settings();
  const dist::RingScope recorded(&ring_, dist::CollGroup::kDp, dist::CollKind::kAllReduce, values.size_bytes(), context(),
                                 label_);
  inner().all_reduce_values(values, op);
  copy_stats();
}

std::unique_ptr<dist::Communicator> RecordingCommunicator::split(int color, int key) {
  pass_settings();
  const dist::RingScope recorded(&ring_, dist::CollGroup::kDp, dist::CollKind::kBarrier, 0, context(), label_);
  return std::make_unique<RecordingCommunicator>(inner().split(color, key), ring_, split_label(label_, ++splits_, color));
}

}  // namespace zt::dist
