// Host staging around the MPI communicator (staged_communicator.hpp). Every collective completes
// before it returns (the copies back need its result), so the Work it hands out is already done.
#include "train/staged_communicator.hpp"

namespace zt::train {
namespace {
class DoneWork final : public dist::Work {
 public:
  void wait() override {}
  bool done() override { return true; }
};

std::size_t bytes_of(const dist::Span& s) { return s.count * dtype_size(s.dtype); }
}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<dist::Communicator> host, backend::Backend& device)
    : ForwardingCommunicator(std::move(host)), device_(device) {}

dist::Span StagedCommunicator::to_host(const dist::Span& device, std::vector<std::byte>& host) {
  host.resize(bytes_of(device));
  if (!host.empty()) device_.copy_to_host(host.data(), device.data, host.size());
  return {host.data(), device.count, device.dtype};
}

void StagedCommunicator::from_host(const dist::Span& device, const std::vector<std::byte>& host) {
  if (!host.empty()) device_.copy_from_host(device.data, host.data(), bytes_of(device));
}

void StagedCommunicator::finish(std::unique_ptr<dist::Work> work) {
  work->wait();
  copy_stats();
}

std::unique_ptr<dist::Work> StagedCommunicator::all_reduce(dist::Span buffer, dist::ReduceOp op) {
  pass_settings();
  finish(inner().all_reduce(to_host(buffer, send_), op));
  from_host(buffer, send_);
  return std::make_unique<DoneWork>();
}

std::unique_ptr<dist::Work> StagedCommunicator::reduce_scatter(dist::Span send, dist::Span recv, dist::ReduceOp op) {
  pass_settings();
  const dist::Span host_send = to_host(send, send_);
  recv_.resize(bytes_of(recv));  // separate even when recv aliases send on the device: MPI_IN_PLACE is not needed
  finish(inner().reduce_scatter(host_send, {recv_.data(), recv.count, recv.dtype}, op));
  from_host(recv, recv_);
  return std::make_unique<DoneWork>();
}

std::unique_ptr<dist::Work> StagedCommunicator::all_gather(dist::Span send, dist::Span recv) {
  pass_settings();
  const dist::Span host_send = to_host(send, send_);
  recv_.resize(bytes_of(recv));
  finish(inner().all_gather(host_send, {recv_.data(), recv.count, recv.dtype}));
  from_host(recv, recv_);
  return std::make_unique<DoneWork>();
}

std::unique_ptr<dist::Work> StagedCommunicator::broadcast(dist::Span buffer, int root) {
  pass_settings();
  finish(inner().broadcast(to_host(buffer, send_), root));
  from_host(buffer, send_);
  return std::make_unique<DoneWork>();
}

// A transfer through its own host buffer: a receive copies it to the device once complete.
class StagedCommunicator::P2pWork final : public dist::Work {
 public:
  P2pWork(StagedCommunicator& owner, dist::Span device, bool receives)
      : owner_(owner), device_(device), receives_(receives), host_(bytes_of(device)) {}
  dist::Span host() { return {host_.data(), device_.count, device_.dtype}; }
  void start(std::unique_ptr<dist::Work> inner) { inner_ = std::move(inner); }
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
    if (receives_ && !landed_ && !host_.empty()) owner_.device_.copy_from_host(device_.data, host_.data(), host_.size());
    landed_ = true;
  }
  StagedCommunicator& owner_;
  dist::Span device_;
  bool receives_, landed_ = false;
  std::vector<std::byte> host_;
  std::unique_ptr<dist::Work> inner_;
};

std::unique_ptr<dist::Work> StagedCommunicator::send(dist::Span buffer, int peer) {
  pass_settings();
  auto work = std::make_unique<P2pWork>(*this, buffer, false);
  const dist::Span host = work->host();
  if (host.count > 0) device_.copy_to_host(host.data, buffer.data, bytes_of(buffer));
  work->start(inner().send(host, peer));
  copy_stats();
  return work;
}

std::unique_ptr<dist::Work> StagedCommunicator::recv(dist::Span buffer, int peer) {
  pass_settings();
  auto work = std::make_unique<P2pWork>(*this, buffer, true);
  work->start(inner().recv(work->host(), peer));
  copy_stats();
  return work;
}

void StagedCommunicator::barrier() {
  pass_settings();
  inner().barrier();
  copy_stats();
}

void StagedCommunicator::all_reduce_values(std::span<double> values, dist::ReduceOp op) {
  pass_settings();
  inner().all_reduce_values(values, op);  // host values: the host communicator takes them as they are
  copy_stats();
}

std::unique_ptr<dist::Communicator> StagedCommunicator::split(int color, int key) {
  pass_settings();
  return std::make_unique<StagedCommunicator>(inner().split(color, key), device_);
}

}  // namespace zt::train
