// The pipeline schedules (pipeline_schedule.hpp).
#include "model/pipeline_schedule.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace zt::model {

namespace {

// Rank `stage`'s pass of micro-batch `micro` through its chunk `chunk`, with its neighbours: the
// previous and next virtual stage (chunk * stages + stage, minus or plus one) live on the ranks
// before and after it, round the ring.
PipeOp make_op(PipeOp::Kind kind, int micro, int chunk, const PipeShape& shape, int stage) {
  const int virtual_stage = chunk * shape.stages + stage, last = shape.stages * shape.chunks - 1;
  const int prev = virtual_stage > 0 ? (virtual_stage - 1) % shape.stages : -1;
  const int next = virtual_stage < last ? (virtual_stage + 1) % shape.stages : -1;
  return kind == PipeOp::Kind::kForward ? PipeOp{kind, micro, prev, next, chunk} : PipeOp{kind, micro, next, prev, chunk};
}

// The k-th forward (or backward) of a rank under interleaving: micro-batches in groups of `stages`,
// each group through every chunk in turn (backwards: the chunks in reverse).
PipeOp interleaved_op(PipeOp::Kind kind, int k, const PipeShape& shape, int stage) {
  const int p = shape.stages, v = shape.chunks;
  const int group = k / (p * v), within = k % (p * v);
  const int chunk_order = within / p, micro = group * p + within % p;
  const int chunk = kind == PipeOp::Kind::kForward ? chunk_order : v - 1 - chunk_order;
  return make_op(kind, micro, chunk, shape, stage);
}

}  // namespace

std::vector<PipeOp> pipeline_ops(const PipeShape& shape, int stage) {
  const int p = shape.stages, v = shape.chunks, m = shape.micro_batches;
  ZT_CHECK(p >= 1 && v >= 1 && stage >= 0 && stage < p && m >= 1, "pipeline schedule: stage ", stage, " of ", p, ", ",
           v, " chunks, ", m, " micro-batches");
  ZT_CHECK(v == 1 || (p > 1 && m % p == 0), "pipeline schedule: interleaving needs more than one stage and a multiple "
           "of them in micro-batches: ", p, " stages, ", m, " micro-batches");
  const int total = m * v;
  // 1F1B: the stages after this one each hold one more forward; interleaved: two more per later rank,
  // plus the other chunks' first group (Megatron-LM's warm-up), and everything when m = p.
  const int warm_up = v == 1 ? std::min(p - stage - 1, m)
                             : (m == p ? total : std::min(2 * (p - stage - 1) + (v - 1) * p, total));
  auto op = [&](PipeOp::Kind kind, int k) {
    return v == 1 ? make_op(kind, k, 0, shape, stage) : interleaved_op(kind, k, shape, stage);
  };
  std::vector<PipeOp> ops;
  for (int k = 0; k < warm_up; ++k) ops.push_back(op(PipeOp::Kind::kForward, k));
  int next_backward = 0;
  for (int k = warm_up; k < total; ++k) {  // steady state: one forward, one backward
    ops.push_back(op(PipeOp::Kind::kForward, k));
    ops.push_back(op(PipeOp::Kind::kBackward, next_backward++));
  }
  while (next_backward < total) ops.push_back(op(PipeOp::Kind::kBackward, next_backward++));  // cool-down
  return ops;
}

std::vector<PipeOp> one_f_one_b(int stages, int stage, int micro_batches) {
  return pipeline_ops({stages, 1, micro_batches}, stage);
}

std::vector<PipeOp> forward_ops(const PipeShape& shape, int stage) {
  std::vector<PipeOp> ops;
  for (int m = 0; m < shape.micro_batches; ++m)
    for (int c = 0; c < shape.chunks; ++c) ops.push_back(make_op(PipeOp::Kind::kForward, m, c, shape, stage));
  return ops;
}

int stream(PipeOp::Kind kind, int sending_chunk) { return 2 * sending_chunk + (kind == PipeOp::Kind::kBackward ? 1 : 0); }

int recv_chunk(const PipeOp& op, int stages, int stage) {
  const int virtual_stage = op.chunk * stages + stage;
  return (op.kind == PipeOp::Kind::kForward ? virtual_stage - 1 : virtual_stage + 1) / stages;
}

int in_flight(const std::vector<PipeOp>& ops, int chunk) {
  int now = 0, most = 0;
  for (const PipeOp& op : ops) {
    if (chunk >= 0 && op.chunk != chunk) continue;
    now += op.kind == PipeOp::Kind::kForward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

double bubble_fraction(int stages, int micro_batches, int chunks) {
  const double idle = stages - 1;
  return idle / (static_cast<double>(chunks) * micro_batches + idle);
}

std::string describe(const PipeOp& op) {
  return cat(op.kind == PipeOp::Kind::kForward ? "F" : "B", op.micro, op.chunk > 0 ? cat(".", op.chunk) : "");
}

}  // namespace zt::model
