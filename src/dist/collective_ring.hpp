// A rank's flight recorder: the last kCapacity collectives it entered (the training communicator's and
// the world's host agreements), each with its per-group sequence number, kind, payload bytes, what the
// job was doing (the communicator's context: "step 3 micro-batch 1/2"), its call number within that
// context, and enter and leave times. When the watchdog fires, the ranks' rings, compared, name the
// rank that never entered (or skipped, or is ahead in) a collective (health/hang_report.hpp).
//
// Recording is cheap and never allocates: fixed slots, the context copied into a fixed buffer, one
// uncontended mutex (the watcher thread that snapshots the ring is its only other user).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

namespace zt::dist {

enum class CollGroup : std::uint8_t {
  kDp,     // the training communicator: gradients, parameters, loss and flag reductions
  kWorld,  // the world's host agreements: start-up checks, checkpoint save, commit and resume
  kP2p,    // point-to-point sends and receives between pipeline stages (each stage its own program)
};
enum class CollKind : std::uint8_t { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kBarrier, kAgreement, kGather,
                                     kSend, kRecv };
enum class CollState : std::uint8_t { kOpen, kDone, kTimedOut };

const char* group_name(CollGroup g);
const char* kind_name(CollKind k);
const char* state_name(CollState s);

struct CollRecord {
  static constexpr std::size_t kContextChars = 95;
  std::uint64_t seq = 0;   // per group, from 1: the n-th collective of this group this rank entered
  std::uint64_t call = 0;  // from 1: the n-th collective (any group) within the same context
  std::uint64_t bytes = 0;
  double enter_s = 0, leave_s = 0;  // wall-clock seconds since the epoch (comparable across nodes via NTP)
  CollKind kind = CollKind::kAllReduce;
  CollGroup group = CollGroup::kDp;
  CollState state = CollState::kOpen;
  // Which communicator of the group: equal on every member, different for different communicators
  // (split_label). Sequences are per group on each rank, so ranks compare #n only within one communicator.
  std::uint32_t comm = 0;
  char context[kContextChars + 1] = {};
};

class CollectiveRing {
 public:
  static constexpr std::size_t kCapacity = 1024;

  // Which entry leave() closes: the slot and its record's sequence (a slot reused since is left alone).
  struct Ticket {
    std::size_t slot = 0;
    std::uint64_t seq = 0;
    CollGroup group = CollGroup::kDp;
  };

  CollectiveRing();
  Ticket enter(CollGroup group, CollKind kind, std::uint64_t bytes, std::string_view context, std::uint32_t comm = 0);
  void leave(const Ticket& t, CollState how = CollState::kDone);

  // The records in the order entered, oldest first (the watcher thread's copy; allocates).
  std::vector<CollRecord> snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::vector<CollRecord> slots_;  // kCapacity, allocated once
  std::uint64_t entered_ = 0;      // records ever entered
  std::array<std::uint64_t, 3> seq_{};
  std::uint64_t call_ = 0;
  std::array<char, CollRecord::kContextChars + 1> last_context_{};
};

double wall_seconds();  // now, as CollRecord's times

// The label of the communicator a split makes: from its parent's label, the split's place among the
// parent's splits (every member splits in the same order: they are collective) and the member's color.
// Members of one child get one label; the children of one split, or of two splits, get different ones.
std::uint32_t split_label(std::uint32_t parent, std::uint32_t split_index, int color);

// The RAII form for blocking operations: enters at construction; leaves at destruction, as timed out
// when an exception (the deadline's CommError) unwinds it. A null ring records nothing.
class RingScope {
 public:
  RingScope(CollectiveRing* ring, CollGroup group, CollKind kind, std::uint64_t bytes, std::string_view context,
            std::uint32_t comm = 0);
  ~RingScope();
  RingScope(const RingScope&) = delete;
  RingScope& operator=(const RingScope&) = delete;

 private:
  CollectiveRing* ring_;
  CollectiveRing::Ticket ticket_;
  int exceptions_;
};

}  // namespace zt::dist
