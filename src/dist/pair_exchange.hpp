// Point-to-point exchange between two ranks over MPI, for --preflight's node-pair bandwidth (and the
// trainer's slow-link check, health/link_check.hpp, with a few KiB): one
// rank per node (the node's first) swaps a buffer with its partner, both directions at once, as
// nccl-tests' sendrecv does. Host memory on every backend: it measures the node-to-node path MPI
// uses (with UCX on InfiniBand the same NICs NCCL uses), not NCCL's GPU-direct path, which the
// all-rank collectives measure. Why not one NCCL communicator per pair: creating N(N-1)/2 of them
// costs seconds each at scale, more than the whole preflight may take.
#pragma once

#include <cstddef>

#include "dist/world.hpp"

namespace zt::dist {

// Sends `count` floats from `send` to world rank `peer` while receiving as many from it into `recv`;
// returns when both are done. Throws CommError naming the peer if that takes over timeout_s.
void exchange_with(const World& world, int peer, const float* send, float* recv, std::size_t count, double timeout_s);

// The round-robin ("circle") schedule of all node pairs: in round r (0 <= r < pair_rounds(n)) node x
// meets pair_partner(n, r, x), or -1 (a bye, when n is odd). Every pair meets exactly once, and each
// round's pairs are disjoint, so they can be measured at the same time without sharing a node.
int pair_rounds(int n_nodes);
int pair_partner(int n_nodes, int round, int node);

}  // namespace zt::dist
