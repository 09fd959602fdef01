// The 1F1B schedule (pipeline_schedule.hpp).
#include "train/pipeline_schedule.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace zt::train {

std::vector<PipeOp> one_f_one_b(int stages, int stage, int micro_batches) {
  ZT_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1, "1f1b: stage ", stage, " of ", stages,
           ", ", micro_batches, " micro-batches");
  const int prev = stage > 0 ? stage - 1 : -1, next = stage + 1 < stages ? stage + 1 : -1;
  auto forward = [&](int m) { return PipeOp{PipeOp::Kind::kForward, m, prev, next}; };
  auto backward = [&](int m) { return PipeOp{PipeOp::Kind::kBackward, m, next, prev}; };
  const int warm_up = std::min(stages - stage - 1, micro_batches);
  std::vector<PipeOp> ops;
  for (int m = 0; m < warm_up; ++m) ops.push_back(forward(m));
  int next_backward = 0;
  for (int m = warm_up; m < micro_batches; ++m) {  // steady state: one forward, one backward
    ops.push_back(forward(m));
    ops.push_back(backward(next_backward++));
  }
  while (next_backward < micro_batches) ops.push_back(backward(next_backward++));  // cool-down
  return ops;
}

int in_flight(const std::vector<PipeOp>& ops) {
  int now = 0, most = 0;
  for (const PipeOp& op : ops) {
    now += op.kind == PipeOp::Kind::kForward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

double bubble_fraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

std::string describe(const PipeOp& op) { return cat(op.kind == PipeOp::Kind::kForward ? "F" : "B", op.micro); }

}  // namespace zt::train
