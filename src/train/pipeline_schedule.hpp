// The 1F1B pipeline schedule (PipeDream-flush, Megatron-LM's non-interleaved schedule; Narayanan et al.
// 2021, §2.2) as plain data: for one stage of `stages`, the ordered forward and backward passes of the
// step's `micro_batches`, each with the transfer it waits for and the one it sends. Stage s first runs
// min(stages - s - 1, m) warm-up forwards, then alternates one forward and one backward (steady state),
// then runs the remaining backwards (cool-down). At most min(stages - s, m) micro-batches are in flight
// on stage s (forwarded, not yet backwarded): the activation sets it needs. The bubble (idle share of a
// stage's time, equal forward and backward costs) is (stages - 1) / (m + stages - 1).
#pragma once

#include <string>
#include <vector>

namespace zt::train {

struct PipeOp {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  int micro = 0;  // micro-batch index in the step
  // The stage whose output (forward: activations; backward: their gradient) this op receives first,
  // and the stage it sends its own to afterwards; -1: none (first / last stage).
  int recv_from = -1, send_to = -1;
  bool operator==(const PipeOp&) const = default;
};

std::vector<PipeOp> one_f_one_b(int stages, int stage, int micro_batches);

// The most micro-batches in flight on `stage` at any point of its schedule (activation sets needed).
int in_flight(const std::vector<PipeOp>& ops);

// (stages - 1) / (micro_batches + stages - 1).
double bubble_fraction(int stages, int micro_batches);

std::string describe(const PipeOp& op);  // "F3", "B0"

}  // namespace zt::train
