// Blocked-time accounting around a communicator (see timed_communicator.hpp).
#include "dist/timed_communicator.hpp"

#include <chrono>

namespace zt::dist {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
}  // namespace

// The inner Work reports the inner communicator's context if its deadline passes, so the settings
// are passed on again at the wait: the trainer may have moved on ("gradient reduction") since the issue.
class TimedCommunicator::TimedWork final : public dist::Work {
 public:
  TimedWork(std::unique_ptr<dist::Work> inner, TimedCommunicator& owner) : inner_(std::move(inner)), owner_(owner) {}
  void wait() override {
    owner_.pass_settings();
    const auto t = Clock::now();
    inner_->wait();
    owner_.blocked_ms_ += ms_since(t);
  }
  bool done() override { return inner_->done(); }

 private:
  std::unique_ptr<dist::Work> inner_;
  TimedCommunicator& owner_;
};

TimedCommunicator::TimedCommunicator(std::unique_ptr<dist::Communicator> inner)
    : ForwardingCommunicator(std::move(inner)) {}

template <typename F>
auto TimedCommunicator::timed(F f) {
  pass_settings();
  const auto t = Clock::now();
  struct Count {  // also when f throws (a watchdog expiry): the stats stay current
    TimedCommunicator& self;
    Clock::time_point t;
    ~Count() {
      self.blocked_ms_ += ms_since(t);
      self.copy_stats();
    }
  } count{*this, t};
  return f(inner());
}

std::unique_ptr<dist::Work> TimedCommunicator::all_reduce(dist::Span buffer, dist::ReduceOp op) {
  return std::make_unique<TimedWork>(timed([&](dist::Communicator& c) { return c.all_reduce(buffer, op); }), *this);
}

std::unique_ptr<dist::Work> TimedCommunicator::reduce_scatter(dist::Span send, dist::Span recv, dist::ReduceOp op) {
  return std::make_unique<TimedWork>(timed([&](dist::Communicator& c) { return c.reduce_scatter(send, recv, op); }), *this);
}

std::unique_ptr<dist::Work> TimedCommunicator::all_gather(dist::Span send, dist::Span recv) {
  return std::make_unique<TimedWork>(timed([&](dist::Communicator& c) { return c.all_gather(send, recv); }), *this);
}

std::unique_ptr<dist::Work> TimedCommunicator::broadcast(dist::Span buffer, int root) {
  return std::make_unique<TimedWork>(timed([&](dist::Communicator& c) { return c.broadcast(buffer, root); }), *this);
}

std::unique_ptr<dist::Work> TimedCommunicator::send(dist::Span buffer, int peer, int stream) {
  return std::make_unique<TimedWork>(timed([&](dist::Communicator& c) { return c.send(buffer, peer, stream); }), *this);
}

std::unique_ptr<dist::Work> TimedCommunicator::recv(dist::Span buffer, int peer, int stream) {
  return std::make_unique<TimedWork>(timed([&](dist::Communicator& c) { return c.recv(buffer, peer, stream); }), *this);
}

void TimedCommunicator::barrier() {
  timed([](dist::Communicator& c) { c.barrier(); });
}

void TimedCommunicator::all_reduce_values(std::span<double> values, dist::ReduceOp op) {
  timed([&](dist::Communicator& c) { c.all_reduce_values(values, op); });
}

std::unique_ptr<dist::Communicator> TimedCommunicator::split(int color, int key) {
  auto child = std::make_unique<TimedCommunicator>(timed([&](dist::Communicator& c) { return c.split(color, key); }));
  child->set_context(context());
  child->set_timeout(timeout_s(), limit_words());
  return child;
}

}  // namespace zt::dist
