// The pipeline schedules: Megatron's order on small pipelines (1F1B and interleaved), every
// micro-batch forwarded and backwarded once per chunk with forwards before backwards and the chunks in
// pipeline order, the in-flight bounds, and a simulation of all ranks that runs every schedule to the
// end with no deadlock and every message matched, under the strictest MPI semantics the trainer meets:
// a send completes only once its receive is posted (rendezvous), and a rank reuses a slot's buffers only
// after that slot's sends completed.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

#include "core/error.hpp"
#include "model/pipeline_schedule.hpp"

namespace zt::model {
namespace {

std::string order(const std::vector<PipeOp>& ops) {
  std::string s;
  for (const PipeOp& op : ops) {
    if (!s.empty()) s += ' ';
    s += describe(op);
  }
  return s;
}

TEST(PipelineSchedule, WarmUpSteadyCoolDown) {
  // 4 stages, 6 micro-batches: stage 0 warms up with 3 forwards, the last stage alternates from the start.
  EXPECT_EQ(order(one_f_one_b(4, 0, 6)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(order(one_f_one_b(4, 2, 6)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(order(one_f_one_b(4, 3, 6)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than stages: all forwards, then all backwards.
  EXPECT_EQ(order(one_f_one_b(4, 0, 2)), "F0 F1 B0 B1");
  EXPECT_EQ(order(one_f_one_b(1, 0, 3)), "F0 B0 F1 B1 F2 B2");  // no pipeline: today's loop
}

TEST(PipelineSchedule, InterleavedOrder) {
  // 2 ranks x 2 chunks, 4 micro-batches (Megatron's example shape): rank 0 warms up with
  // 2 (p - 0 - 1) + (v - 1) p = 4 forwards, groups of 2 micro-batches through chunk 0 then chunk 1;
  // backwards take the chunks in reverse.
  EXPECT_EQ(order(pipeline_ops({2, 2, 4}, 0)), "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
  EXPECT_EQ(order(pipeline_ops({2, 2, 4}, 1)), "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
  // m = p: everything forward first (Megatron's rule), then backward.
  EXPECT_EQ(order(pipeline_ops({2, 2, 2}, 1)), "F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1");
}

TEST(PipelineSchedule, TransfersGoToTheNeighbours) {
  const std::vector<PipeOp> mid = one_f_one_b(3, 1, 2);
  EXPECT_EQ(mid.front(), (PipeOp{PipeOp::Kind::kForward, 0, 0, 2}));
  EXPECT_EQ(mid.back(), (PipeOp{PipeOp::Kind::kBackward, 1, 2, 0}));
  EXPECT_EQ(one_f_one_b(3, 0, 1).front().recv_from, -1);  // the first stage reads tokens
  EXPECT_EQ(one_f_one_b(3, 0, 1).back().send_to, -1);     // and its input gradient goes nowhere
  EXPECT_EQ(one_f_one_b(3, 2, 1).front().send_to, -1);    // the last stage computes the loss
  EXPECT_EQ(one_f_one_b(3, 2, 1).back().send_to, 1);
  // Interleaved, 3 ranks x 2 chunks: rank 0's chunk 1 (virtual stage 3) reads rank 2's chunk 0, and its
  // gradient goes back there; rank 2's chunk 1 is the last virtual stage.
  const PipeShape shape{3, 2, 3};
  for (const PipeOp& op : pipeline_ops(shape, 0)) {
    if (op.chunk != 1) continue;
    EXPECT_EQ(op.kind == PipeOp::Kind::kForward ? op.recv_from : op.send_to, 2);
    EXPECT_EQ(op.kind == PipeOp::Kind::kForward ? op.send_to : op.recv_from, 1);
    EXPECT_EQ(recv_chunk(op, 3, 0), op.kind == PipeOp::Kind::kForward ? 0 : 1);
  }
  for (const PipeOp& op : pipeline_ops(shape, 2)) {
    if (op.chunk != 1) continue;
    EXPECT_EQ(op.kind == PipeOp::Kind::kForward ? op.send_to : op.recv_from, -1);
  }
}

// Each (micro, chunk) forwarded once then backwarded once; within a chunk micro-batches in order (so
// micro % slots never collides with one in flight); 1F1B's in-flight bound min(p - s, m).
TEST(PipelineSchedule, EachMicroBatchOnceAndInFlightBound) {
  for (int p = 1; p <= 5; ++p)
    for (int v = 1; v <= (p > 1 ? 3 : 1); ++v)
      for (int m = v > 1 ? p : 1; m <= 9; m += v > 1 ? p : 1)
        for (int s = 0; s < p; ++s) {
          const std::vector<PipeOp> ops = pipeline_ops({p, v, m}, s);
          ASSERT_EQ(ops.size(), 2u * m * v);
          std::map<std::pair<int, int>, int> state;  // 1 forwarded, 2 backwarded
          std::vector<int> next_forward(v, 0), next_backward(v, 0);
          for (const PipeOp& op : ops) {
            const bool fwd = op.kind == PipeOp::Kind::kForward;
            int& st = state[{op.micro, op.chunk}];
            ASSERT_EQ(st, fwd ? 0 : 1) << p << " " << v << " " << s << " " << m;
            ++st;
            ASSERT_EQ(op.micro, (fwd ? next_forward : next_backward)[op.chunk]++);
          }
          if (v == 1) {
            EXPECT_EQ(in_flight(ops), std::min(p - s, m)) << "pp=" << p << " stage " << s << " m=" << m;
          }
          for (int c = 0; c < v; ++c) EXPECT_LE(in_flight(ops, c), m);
        }
}

// Every rank's list run together. A send is posted at once and completes when its receive is posted;
// a receive completes when the matching send is posted (per stream, in order: it must be the same
// micro-batch); before an op on (micro, chunk) the rank waits for the sends from that slot
// (chunk, micro % in_flight(chunk)). Returns "" when all ranks finish, else where they stopped.
std::string simulate(const PipeShape& shape) {
  const int p = shape.stages;
  std::vector<std::vector<PipeOp>> ops;
  std::vector<std::vector<int>> slots(p);
  for (int s = 0; s < p; ++s) {
    ops.push_back(pipeline_ops(shape, s));
    for (int c = 0; c < shape.chunks; ++c) slots[s].push_back(in_flight(ops[s], c));
  }
  struct Message {
    int micro;
    bool received = false;
  };
  std::map<std::tuple<int, int, int>, std::deque<Message>> sent;  // {from, to, stream}: messages in order
  std::map<std::tuple<int, int, int>, int> taken;                  // how many of each stream were received
  // Pending sends per rank and slot: {stream key, index in it}.
  std::vector<std::map<std::pair<int, int>, std::vector<std::pair<std::tuple<int, int, int>, int>>>> pending(p);
  std::vector<std::size_t> pc(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      if (pc[s] == ops[s].size()) continue;
      const PipeOp& op = ops[s][pc[s]];
      const std::pair<int, int> slot{op.chunk, op.micro % slots[s][static_cast<std::size_t>(op.chunk)]};
      auto& mine = pending[s][slot];
      std::erase_if(mine, [&](const auto& e) { return sent[e.first][static_cast<std::size_t>(e.second)].received; });
      if (!mine.empty()) continue;  // the slot's sends have not left
      if (op.recv_from >= 0) {
        const std::tuple<int, int, int> key{op.recv_from, s, stream(op.kind, recv_chunk(op, p, s))};
        const int index = taken[key];
        auto& q = sent[key];
        if (static_cast<int>(q.size()) <= index) continue;  // not sent yet
        if (q[static_cast<std::size_t>(index)].micro != op.micro)
          return cat("rank ", s, " ", describe(op), " received micro-batch ", q[static_cast<std::size_t>(index)].micro);
        q[static_cast<std::size_t>(index)].received = true;
        ++taken[key];
      }
      if (op.send_to >= 0) {
        const std::tuple<int, int, int> key{s, op.send_to, stream(op.kind, op.chunk)};
        sent[key].push_back({op.micro});
        mine.push_back({key, static_cast<int>(sent[key].size()) - 1});
      }
      ++pc[s];
      progress = true;
    }
  }
  for (int s = 0; s < p; ++s)
    if (pc[s] != ops[s].size()) return cat("deadlock: rank ", s, " at ", describe(ops[s][pc[s]]));
  return "";
}

TEST(PipelineSchedule, AllRanksTogetherFinish) {
  for (int p = 1; p <= 8; ++p)
    for (int v = 1; v <= (p > 1 ? 4 : 1); ++v)
      for (int m = v > 1 ? p : 1; m <= 17; m += v > 1 ? p : 1) ASSERT_EQ(simulate({p, v, m}), "") << "pp=" << p << " vpp=" << v << " m=" << m;
}

TEST(PipelineSchedule, InterleavingNeedsWholeGroups) {
  EXPECT_THROW(pipeline_ops({2, 3, 3}, 0), std::exception);
  EXPECT_THROW(pipeline_ops({1, 2, 4}, 0), std::exception);
}

TEST(PipelineSchedule, BubbleFraction) {
  EXPECT_DOUBLE_EQ(bubble_fraction(1, 8), 0.0);
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8, 2), 3.0 / 19.0);
}

}  // namespace
}  // namespace zt::model
