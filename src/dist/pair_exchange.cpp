// MPI point-to-point for the node-pair measurement, polled so a dead peer becomes a CommError.
#include "dist/pair_exchange.hpp"

#include <chrono>
#include <climits>
#include <thread>

#include "dist/mpi_check.hpp"

namespace zt::dist {
namespace {
constexpr int kTag = 2207;  // pair traffic (preflight, the link check): a tag of its own on the world
}

void exchange_with(const World& world, int peer, const float* send, float* recv, std::size_t count, double timeout_s) {
  if (count > static_cast<std::size_t>(INT_MAX))
    throw CommError(cat("exchange with rank ", peer, ": ", count, " floats exceed MPI's int count (lower preflight.max_mb)"));
  const MPI_Comm comm = *static_cast<const MPI_Comm*>(world.native_comm());
  // The receive is posted first, as MPI_Sendrecv and Open MPI's collectives do, so the pair measures what
  // they get: over TCP, Open MPI 4.1 (ob1) then moves about half the link rate each way (a full-duplex link
  // carries 41-48 Mbit/s each way of 50 with the sends first: tools/bench/cluster/bandwidth.sh, BENCHMARKS).
  // Sends first broke the trainer's slow-link check (health/link_check.cpp: its 4 KiB exchanges no longer
  // showed a 50 ms delay on a netns link), so the order stays.
  MPI_Request requests[2];
  ZT_MPI(MPI_Irecv(recv, static_cast<int>(count), MPI_FLOAT, peer, kTag, comm, &requests[0]));
  ZT_MPI(MPI_Isend(send, static_cast<int>(count), MPI_FLOAT, peer, kTag, comm, &requests[1]));
  const auto start = std::chrono::steady_clock::now();
  for (int done = 0;;) {
    ZT_MPI(MPI_Testall(2, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s)
      throw CommError(cat("exchange of ", count * sizeof(float), " bytes with rank ", peer,
                          " did not complete within dist.timeout_s=", timeout_s, " s: that rank or the link is down"));
    std::this_thread::yield();  // Open MPI progresses only inside MPI calls: poll, but leave the core to peers
  }
}

int pair_rounds(int n_nodes) { return n_nodes < 2 ? 0 : (n_nodes % 2 == 0 ? n_nodes - 1 : n_nodes); }

int pair_partner(int n_nodes, int round, int node) {
  const int n = n_nodes % 2 == 0 ? n_nodes : n_nodes + 1;  // an odd count gets a phantom node: its partner has a bye
  const int m = n - 1;                                      // node n-1 is fixed, the others rotate
  int partner;
  if (node == n - 1) partner = round;
  else if (node == round) partner = n - 1;
  else partner = ((2 * round - node) % m + m) % m;
  return partner >= n_nodes ? -1 : partner;
}

}  // namespace zt::dist
