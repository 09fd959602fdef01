// The pipeline schedules as plain data: for rank `stage` of `stages`, the ordered forward and backward
// passes of the step's `micro_batches`, each with its model chunk, the transfer it waits for and the
// one it sends. Both are Megatron-LM's (Narayanan et al. 2021, §2.2):
//
// 1F1B (PipeDream-flush, chunks = 1): stage s first runs min(stages - s - 1, m) warm-up forwards, then
//   alternates one forward and one backward (steady state), then runs the remaining backwards
//   (cool-down). At most min(stages - s, m) micro-batches are in flight on stage s (forwarded, not yet
//   backwarded): the activation sets it needs. Bubble (idle share of a stage's time, equal forward and
//   backward costs): (p - 1) / (m + p - 1).
//
// Interleaved (chunks = v > 1): the blocks are cut into p x v virtual stages; rank s runs virtual
//   stages s, s + p, ..., s + (v - 1) p (its v model chunks), so a micro-batch passes every rank v
//   times and the fill and drain take 1/v as long: bubble (p - 1) / (v m + p - 1), for v times the
//   transfers. m must be a multiple of p. A rank's forwards take the micro-batches in groups of p,
//   each group through chunk 0, then chunk 1, ...; its backwards the same with the chunks reversed.
//   Warm-up: 2 (p - s - 1) + (v - 1) p forwards (all of them when m = p), then one forward and one
//   backward alternate, then the cool-down backwards. Rank 0 holds the most in flight. (Megatron-LM
//   later allowed any m; with buffers reused per slot, as here, such orders can deadlock once sends
//   wait for their receives: the simulation in tests/unit/model finds them, e.g. p 2, v 3, m 3.)
//
// Transfers: forward sends a chunk's output to the next virtual stage's rank, backward its input
// gradient to the previous one. Between two ranks several streams may travel the same way (forward and
// backward at p = 2, and chunks): `stream` names one (its kind and the sending chunk), and within a
// stream messages arrive in the order sent (tests/unit/model simulates every rank to the end).
#pragma once

#include <string>
#include <vector>

namespace zt::model {

struct PipeOp {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  int micro = 0;  // micro-batch index in the step
  // The rank whose output (forward: activations; backward: their gradient) this op receives first,
  // and the rank it sends its own to afterwards; -1: none (first / last virtual stage).
  int recv_from = -1, send_to = -1;
  int chunk = 0;  // which of the rank's model chunks (0 without interleaving)
  bool operator==(const PipeOp&) const = default;
};

struct PipeShape {
  int stages = 1;         // parallel.pp
  int chunks = 1;         // parallel.vpp: model chunks per rank (1: 1F1B, > 1: interleaved)
  int micro_batches = 1;  // per step (grad_accum)
};

// Rank `stage`'s ops: 1F1B when shape.chunks == 1, interleaved otherwise.
std::vector<PipeOp> pipeline_ops(const PipeShape& shape, int stage);
std::vector<PipeOp> one_f_one_b(int stages, int stage, int micro_batches);
// Forwards only (evaluation): each micro-batch in turn through the rank's chunks; any micro_batches.
std::vector<PipeOp> forward_ops(const PipeShape& shape, int stage);

// The message stream a transfer travels on between two ranks (the MPI tag): the op's kind and the
// sending chunk; `sending_chunk` is op.chunk for sends, the peer's chunk for receives (recv_chunk).
int stream(PipeOp::Kind kind, int sending_chunk);
// The chunk that sent what `op` receives: the previous virtual stage's (forward) or the next one's.
int recv_chunk(const PipeOp& op, int stages, int stage);

// The most micro-batches in flight at any point of a rank's ops, in chunk `chunk` (-1: all chunks;
// each in-flight pair (micro, chunk) holds one activation set of that chunk).
int in_flight(const std::vector<PipeOp>& ops, int chunk = -1);

// (p - 1) / (chunks * m + p - 1).
double bubble_fraction(int stages, int micro_batches, int chunks = 1);

std::string describe(const PipeOp& op);  // "F3", "B0"; with chunks "F3.1" (micro 3, chunk 1)

}  // namespace zt::model
