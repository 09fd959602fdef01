// The flight recorder of collective_ring.hpp.
#include "dist/collective_ring.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>

namespace zt::dist {

const char* group_name(CollGroup g) {
  switch (g) {
    case CollGroup::kDp: return "dp";
    case CollGroup::kWorld: return "world";
    case CollGroup::kP2p: return "p2p";
  }
  return "?";
}

const char* kind_name(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: return "all_reduce";
    case CollKind::kReduceScatter: return "reduce_scatter";
    case CollKind::kAllGather: return "all_gather";
    case CollKind::kBroadcast: return "broadcast";
    case CollKind::kBarrier: return "barrier";
    case CollKind::kAgreement: return "agreement";
    case CollKind::kGather: return "gather";
    case CollKind::kSend: return "send";
    case CollKind::kRecv: return "recv";
  }
  return "?";
}

const char* state_name(CollState s) {
  switch (s) {
    case CollState::kOpen: return "open";
    case CollState::kDone: return "done";
    case CollState::kTimedOut: return "timed-out";
  }
  return "?";
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

CollectiveRing::CollectiveRing() : slots_(kCapacity) {}

CollectiveRing::Ticket CollectiveRing::enter(CollGroup group, CollKind kind, std::uint64_t bytes,
                                             std::string_view context, std::uint32_t comm) {
  const double now = wall_seconds();
  const std::size_t n = std::min(context.size(), CollRecord::kContextChars);
  std::lock_guard<std::mutex> lock(mutex_);
  // The call number restarts with each new context ("step 3 micro-batch 2/2" after "... 1/2").
  const bool same = std::strlen(last_context_.data()) == n && std::memcmp(last_context_.data(), context.data(), n) == 0;
  if (!same) {
    std::memcpy(last_context_.data(), context.data(), n);
    last_context_[n] = '\0';
    call_ = 0;
  }
  const std::size_t slot = entered_++ % kCapacity;
  CollRecord& r = slots_[slot];
  r.seq = ++seq_[static_cast<std::size_t>(group)];
  r.call = ++call_;
  r.bytes = bytes;
  r.enter_s = now;
  r.leave_s = 0;
  r.kind = kind;
  r.group = group;
  r.comm = comm;
  r.state = CollState::kOpen;
  std::memcpy(r.context, context.data(), n);
  r.context[n] = '\0';
  return {slot, r.seq, group};
}

void CollectiveRing::leave(const Ticket& t, CollState how) {
  const double now = wall_seconds();
  std::lock_guard<std::mutex> lock(mutex_);
  CollRecord& r = slots_[t.slot];
  if (r.seq != t.seq || r.group != t.group || r.state != CollState::kOpen) return;
  r.state = how;
  r.leave_s = now;
}

std::vector<CollRecord> CollectiveRing::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(entered_, kCapacity));
  std::vector<CollRecord> out;
  out.reserve(n);
  for (std::uint64_t i = entered_ - n; i < entered_; ++i) out.push_back(slots_[i % kCapacity]);
  return out;
}

RingScope::RingScope(CollectiveRing* ring, CollGroup group, CollKind kind, std::uint64_t bytes,
                     std::string_view context, std::uint32_t comm)
    : ring_(ring), exceptions_(std::uncaught_exceptions()) {
  if (ring_) ticket_ = ring_->enter(group, kind, bytes, context, comm);
}

std::uint32_t split_label(std::uint32_t parent, std::uint32_t split_index, int color) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the three words
  for (const std::uint64_t word : {std::uint64_t{parent}, std::uint64_t{split_index}, static_cast<std::uint64_t>(color)})
    for (int b = 0; b < 8; ++b) h = (h ^ ((word >> (8 * b)) & 0xff)) * 1099511628211ull;
  const auto label = static_cast<std::uint32_t>(h ^ (h >> 32));
  return label == 0 ? 1 : label;  // 0 is the root's
}

RingScope::~RingScope() {
  if (ring_) ring_->leave(ticket_, std::uncaught_exceptions() > exceptions_ ? CollState::kTimedOut : CollState::kDone);
}

}  // namespace zt::dist
