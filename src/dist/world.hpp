// The MPI world this process runs in: rank, size, node-local rank (ranks sharing this host's memory)
// and the host name. Works under mpirun, under srun --mpi=pmix, and as a single process with no
// launcher. Plain C++ header: mpi.h stays inside world.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace zt::dist {

class CollectiveRing;

class World {
 public:
  // Initialises MPI (MPI_THREAD_FUNNELED: only the main thread calls MPI) and finds the node layout.
  static std::unique_ptr<World> init(int& argc, char**& argv);
  ~World();  // MPI_Finalize
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the processes on this host
  int local_size() const { return local_size_; }
  int n_nodes() const { return n_nodes_; }
  const std::string& host() const { return host_; }
  bool is_root() const { return rank_ == 0; }

  // The watchdog of the agreements below (dist.timeout_s; infinite until set). Each agreement is one
  // deadline, `timeout_s` after this rank arrives, whatever number of MPI operations it takes. Rank 0
  // collects every agreement point to point, so when its deadline passes it names the ranks that
  // never arrived; the others wait kPeerGraceS longer for rank 0's answer, so rank 0's message (with
  // the names) is normally the one printed. Expiry throws CommError naming `what` ("step 12
  // checkpoint commit"); the boundary (apps/boundary.hpp) then ends every rank with MPI_Abort.
  // `words` say what the limit is in those messages (start_up_limit_words); by default
  // "dist.timeout_s=<seconds> s".
  static constexpr double kPeerGraceS = 1.0;
  void set_timeout(double seconds, std::string words = {});
  double timeout_s() const { return timeout_s_; }

  // Payloads of any size: they travel as messages of at most this many bytes (MPI counts are ints;
  // a tensor-parallel shard gathered for model.h5 is GBs). A variable for the tests' sake only.
  static inline std::size_t max_message_bytes = std::size_t{1} << 30;

  // Collective agreement: every rank calls; returns the max (or min) over ranks.
  long long max_over_ranks(long long value, std::string_view what = "an agreement over ranks") const;
  long long min_over_ranks(long long value, std::string_view what = "an agreement over ranks") const;
  // Gathers one string from every rank onto rank 0 (others get an empty vector).
  std::vector<std::string> gather_to_root(const std::string& mine, std::string_view what = "a gather onto rank 0") const;
  // The same, each rank's string handed to `take` on rank 0 in rank order, one at a time, as it arrives:
  // rank 0 never holds them all (a tensor-parallel model's parts gathered for model.h5).
  void gather_to_root_each(std::string_view mine, std::string_view what,
                           const std::function<void(int rank, std::string_view bytes)>& take) const;
  // Every rank's `mine` (the same length on every rank), concatenated in rank order, on every rank.
  std::vector<std::uint64_t> all_gather(const std::vector<std::uint64_t>& mine,
                                        std::string_view what = "an all-gather over ranks") const;
  void barrier(std::string_view what = "a barrier") const;
  // Rank 0's `payload` on every rank (the others' argument is ignored), once every rank has arrived.
  std::string broadcast_from_root(const std::string& payload, std::string_view what) const;
  // A barrier that sleeps between polls, calling `idle` about every `poll_seconds` until every rank
  // has arrived: MPI's blocking barrier spins a core, which ranks done early should leave to others.
  // Bounded by the watchdog like the agreements above, unless `under_watchdog` is false: ztok's ranks'
  // work has no bound, so its `idle` enforces a progress deadline instead (ztok/heartbeat.hpp).
  void wait_for_all(double poll_seconds, const std::function<void()>& idle, bool under_watchdog = true) const;
  // The flight recorder each agreement above records into as group "world" (collective_ring.hpp), or
  // none (nullptr). An observer, not part of the world's state: the trainer attaches its ring for
  // its lifetime, so a hang report sees the host agreements beside the communicator's collectives.
  void record_into(CollectiveRing* ring) const { ring_ = ring; }

  // Ends every rank of the job now with this exit code (MPI_Abort on the world): no peer is left
  // waiting in a collective. A job of one rank just exits.
  [[noreturn]] void abort(int exit_code) const;

  // The MPI_Comm of the world, for dist/ internals that build communicators (opaque elsewhere).
  const void* native_comm() const;

 private:
  World() = default;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, n_nodes_ = 1;
  std::string host_;
  double timeout_s_ = std::numeric_limits<double>::infinity();
  std::string timeout_words_ = "no deadline";
  struct Comms;
  std::unique_ptr<Comms> comms_;
  mutable CollectiveRing* ring_ = nullptr;
};

// World::record_into(ring) for this object's lifetime (also when a constructor after it throws).
class WorldRecording {
 public:
  WorldRecording(const World& world, CollectiveRing* ring) : world_(world) { world_.record_into(ring); }
  ~WorldRecording() { world_.record_into(nullptr); }
  WorldRecording(const WorldRecording&) = delete;
  WorldRecording& operator=(const WorldRecording&) = delete;

 private:
  const World& world_;
};

// Number of CUDA devices this process can use: 0 where the build has no CUDA backend, no driver is
// loaded or no GPU is visible, so one binary runs on CPU-only machines too.
int cuda_device_count();
// Total memory of CUDA device `device` in bytes (0 where there is none or no CUDA backend).
std::uint64_t cuda_device_memory_bytes(int device);

}  // namespace zt::dist
