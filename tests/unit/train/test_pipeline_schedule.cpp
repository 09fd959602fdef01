// The 1F1B schedule: Megatron's order on small pipelines, every micro-batch forwarded and backwarded
// once per stage, the in-flight bound, and a simulation of all stages (sends never block, receives
// wait for the matching send) that runs every schedule to the end: no deadlock, messages matched in order.
#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "train/pipeline_schedule.hpp"

namespace zt::train {
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

TEST(PipelineSchedule, TransfersGoToTheNeighbours) {
  const std::vector<PipeOp> mid = one_f_one_b(3, 1, 2);
  EXPECT_EQ(mid.front(), (PipeOp{PipeOp::Kind::kForward, 0, 0, 2}));
  EXPECT_EQ(mid.back(), (PipeOp{PipeOp::Kind::kBackward, 1, 2, 0}));
  EXPECT_EQ(one_f_one_b(3, 0, 1).front().recv_from, -1);  // the first stage reads tokens
  EXPECT_EQ(one_f_one_b(3, 0, 1).back().send_to, -1);     // and its input gradient goes nowhere
  EXPECT_EQ(one_f_one_b(3, 2, 1).front().send_to, -1);    // the last stage computes the loss
  EXPECT_EQ(one_f_one_b(3, 2, 1).back().send_to, 1);
}

TEST(PipelineSchedule, EachMicroBatchOnceAndInFlightBound) {
  for (int p = 1; p <= 5; ++p)
    for (int m = 1; m <= 9; ++m)
      for (int s = 0; s < p; ++s) {
        const std::vector<PipeOp> ops = one_f_one_b(p, s, m);
        ASSERT_EQ(ops.size(), 2u * m);
        std::map<int, int> state;  // 1 forwarded, 2 backwarded
        for (const PipeOp& op : ops) {
          int& st = state[op.micro];
          ASSERT_EQ(st, op.kind == PipeOp::Kind::kForward ? 0 : 1) << p << " " << s << " " << m;
          ++st;
        }
        EXPECT_EQ(in_flight(ops), std::min(p - s, m)) << "pp=" << p << " stage " << s << " m=" << m;
      }
}

// Every stage's list run together: a send is queued at once, a receive waits until the matching send
// is queued (per direction, in order). The pipeline must finish, each receive matching its micro-batch.
TEST(PipelineSchedule, AllStagesTogetherFinish) {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 8; ++m) {
      std::vector<std::vector<PipeOp>> ops;
      for (int s = 0; s < p; ++s) ops.push_back(one_f_one_b(p, s, m));
      std::vector<std::size_t> pc(p, 0);
      // queue[{from, to, kind}] = micro-batches sent, in order
      std::map<std::tuple<int, int, int>, std::deque<int>> queue;
      bool progress = true;
      while (progress) {
        progress = false;
        for (int s = 0; s < p; ++s) {
          if (pc[s] == ops[s].size()) continue;
          const PipeOp& op = ops[s][pc[s]];
          const int kind = static_cast<int>(op.kind);
          if (op.recv_from >= 0) {
            auto& q = queue[{op.recv_from, s, kind}];
            if (q.empty()) continue;  // blocked
            ASSERT_EQ(q.front(), op.micro) << "pp=" << p << " m=" << m << " stage " << s;
            q.pop_front();
          }
          if (op.send_to >= 0) queue[{s, op.send_to, kind}].push_back(op.micro);
          ++pc[s];
          progress = true;
        }
      }
      for (int s = 0; s < p; ++s) ASSERT_EQ(pc[s], ops[s].size()) << "deadlock: pp=" << p << " m=" << m << " stage " << s;
    }
}

TEST(PipelineSchedule, BubbleFraction) {
  EXPECT_DOUBLE_EQ(bubble_fraction(1, 8), 0.0);
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8), 3.0 / 11.0);
}

}  // namespace
}  // namespace zt::train
