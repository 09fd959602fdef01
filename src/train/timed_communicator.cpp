// Blocked-time accounting around a communicator (see timed_communicator.hpp).
#include "train/timed_communicator.hpp"

#include <chrono>

namespace zt::train {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

class TimedWork final : public dist::Work {
 public:
  TimedWork(std::unique_ptr<dist::Work> inner, std::shared_ptr<double> blocked_ms)
      : inner_(std::move(inner)), blocked_ms_(std::move(blocked_ms)) {}
  void wait() override {
    const auto t = Clock::now();
    inner_->wait();
    *blocked_ms_ += ms_since(t);
  }
  bool done() override { return inner_->done(); }

 private:
  std::unique_ptr<dist::Work> inner_;
  std::shared_ptr<double> blocked_ms_;
};
}  // namespace

TimedCommunicator::TimedCommunicator(std::unique_ptr<dist::Communicator> inner) : inner_(std::move(inner)) {
  set_timeout(inner_->timeout_s());
}

template <typename F>
auto TimedCommunicator::timed(F f) {
  inner_->set_context(context());
  inner_->set_timeout(timeout_s());
  const auto t = Clock::now();
  struct Count {  // also when f throws (a watchdog expiry): the stats stay current
    TimedCommunicator& self;
    Clock::time_point t;
    ~Count() {
      *self.blocked_ms_ += ms_since(t);
      self.stats_ = self.inner_->stats();
    }
  } count{*this, t};
  return f(*inner_);
}

std::unique_ptr<dist::Work> TimedCommunicator::all_reduce(dist::Span buffer, dist::ReduceOp op) {
  return std::make_unique<TimedWork>(timed([&](dist::Communicator& c) { return c.all_reduce(buffer, op); }), blocked_ms_);
}

std::unique_ptr<dist::Work> TimedCommunicator::reduce_scatter(dist::Span send, dist::Span recv, dist::ReduceOp op) {
  return std::make_unique<TimedWork>(timed([&](dist::Communicator& c) { return c.reduce_scatter(send, recv, op); }),
                                     blocked_ms_);
}

std::unique_ptr<dist::Work> TimedCommunicator::all_gather(dist::Span send, dist::Span recv) {
  return std::make_unique<TimedWork>(timed([&](dist::Communicator& c) { return c.all_gather(send, recv); }), blocked_ms_);
}

std::unique_ptr<dist::Work> TimedCommunicator::broadcast(dist::Span buffer, int root) {
  return std::make_unique<TimedWork>(timed([&](dist::Communicator& c) { return c.broadcast(buffer, root); }), blocked_ms_);
}

void TimedCommunicator::barrier() {
  timed([](dist::Communicator& c) { c.barrier(); });
}

double TimedCommunicator::all_reduce_value(double value, dist::ReduceOp op) {
  return timed([&](dist::Communicator& c) { return c.all_reduce_value(value, op); });
}

}  // namespace zt::train
