// Host staging around the MPI communicator (staged_communicator.hpp). Every collective completes
// before it returns (the copies back need its result), so the Work it hands out is already done.
#include "dist/staged_communicator.hpp"

namespace zt::dist {
namespace {
class DoneWork final : public Work {
 public:
  void wait() override {}
  bool done() override { return true; }
};

}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> host, std::shared_ptr<DeviceCopies> device)
    : ForwardingCommunicator(std::move(host)), device_(std::move(device)) {}

Span StagedCommunicator::to_host(const Span& device, std::vector<std::byte>& host) {
  host.resize(device.bytes());
  if (!host.empty()) device_->to_host(host.data(), device.data, host.size());
  return {host.data(), device.count, device.dtype};
}

void StagedCommunicator::from_host(const Span& device, const std::vector<std::byte>& host) {
  if (!host.empty()) device_->to_device(device.data, host.data(), device.bytes());
}

void StagedCommunicator::finish(std::unique_ptr<Work> work) {
  work->wait();
  copy_stats();
}

std::unique_ptr<Work> StagedCommunicator::all_reduce(Span buffer, ReduceOp op) {
  pass_settings();
  finish(inner().all_reduce(to_host(buffer, send_), op));
  from_host(buffer, send_);
  return std::make_unique<DoneWork>();
}

std::unique_ptr<Work> StagedCommunicator::reduce_scatter(Span send, Span recv, ReduceOp op) {
  pass_settings();
  const Span host_send = to_host(send, send_);
  recv_.resize(recv.bytes());  // separate even when recv aliases send on the device: MPI_IN_PLACE is not needed
  finish(inner().reduce_scatter(host_send, {recv_.data(), recv.count, recv.dtype}, op));
  from_host(recv, recv_);
  return std::make_unique<DoneWork>();
}

std::unique_ptr<Work> StagedCommunicator::all_gather(Span send, Span recv) {
  pass_settings();
  const Span host_send = to_host(send, send_);
  recv_.resize(recv.bytes());
  finish(inner().all_gather(host_send, {recv_.data(), recv.count, recv.dtype}));
  from_host(recv, recv_);
  return std::make_unique<DoneWork>();
}

std::unique_ptr<Work> StagedCommunicator::broadcast(Span buffer, int root) {
  pass_settings();
  finish(inner().broadcast(to_host(buffer, send_), root));
  from_host(buffer, send_);
  return std::make_unique<DoneWork>();
}

// A transfer through its own host buffer: a receive copies it to the device once complete.
class StagedCommunicator::P2pWork final : public Work {
 public:
  P2pWork(StagedCommunicator& owner, Span device, bool receives)
      : owner_(owner), device_(device), receives_(receives), host_(device.bytes()) {}
  Span host() { return {host_.data(), device_.count, device_.dtype}; }
  void start(std::unique_ptr<Work> inner) { inner_ = std::move(inner); }
  void wait() override {
    owner_.pass_settings();
    inner_->wait();
    land();
  }
  bool done() override {
    if (!inner_->done()) return false;
    land();
    return true;
  }

 private:
  void land() {
    if (receives_ && !landed_ && !host_.empty()) owner_.device_->to_device(device_.data, host_.data(), host_.size());
    landed_ = true;
  }
  StagedCommunicator& owner_;
  Span device_;
  bool receives_, landed_ = false;
  std::vector<std::byte> host_;
  std::unique_ptr<Work> inner_;
};

std::unique_ptr<Work> StagedCommunicator::send(Span buffer, int peer, int stream) {
  pass_settings();
  auto work = std::make_unique<P2pWork>(*this, buffer, false);
  const Span host = work->host();
  if (host.count > 0) device_->to_host(host.data, buffer.data, buffer.bytes());
  work->start(inner().send(host, peer, stream));
  copy_stats();
  return work;
}

std::unique_ptr<Work> StagedCommunicator::recv(Span buffer, int peer, int stream) {
  pass_settings();
  auto work = std::make_unique<P2pWork>(*this, buffer, true);
  work->start(inner().recv(work->host(), peer, stream));
  copy_stats();
  return work;
}

void StagedCommunicator::barrier() {
  pass_settings();
  inner().barrier();
  copy_stats();
}

void StagedCommunicator::all_reduce_values(std::span<double> values, ReduceOp op) {
  pass_settings();
  inner().all_reduce_values(values, op);  // host values: the host communicator takes them as they are
  copy_stats();
}

std::unique_ptr<Communicator> StagedCommunicator::split(int color, int key) {
  pass_settings();
  return std::make_unique<StagedCommunicator>(inner().split(color, key), device_);
}

}  // namespace zt::dist
