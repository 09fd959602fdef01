// Host staging (dist.backend=mpi on a device backend) gives what the MPI communicator gives on the same
// data, in place or not, for every collective; and 16-bit words (bf16 working weights) all-gather and
// broadcast bit-exactly, and 16-bit sums pass through. The CPU backend stands in for the device: its
// copies are the staging copies.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "backend/half.hpp"
#include "dist/communicator.hpp"
#include "dist/recording_communicator.hpp"
#include "dist/staged_communicator.hpp"
#include "dist/timed_communicator.hpp"
#include "tests/mpi/mpi_test_world.hpp"
#include "train/wiring.hpp"

namespace zt::train {
namespace {
using dist::ReduceOp;
using dist::Span;

class Staged : public ::testing::Test {
 protected:
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  std::unique_ptr<dist::Communicator> direct = dist::make_mpi_communicator(test::world(), 60);
  dist::StagedCommunicator staged{dist::make_mpi_communicator(test::world(), 60), device_copies(*be)};
  int r = direct->rank(), w = direct->size();
};

std::vector<float> values(int rank, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i) - 3.0f * static_cast<float>(rank);
  return v;
}

TEST_F(Staged, EveryCollectiveMatchesTheDirectOne) {
  const std::size_t n = 5;
  std::vector<float> a = values(r, n * w), b = a;
  direct->all_reduce(dist::span_of(a.data(), a.size()), ReduceOp::kSum)->wait();
  staged.all_reduce(dist::span_of(b.data(), b.size()), ReduceOp::kSum)->wait();
  EXPECT_EQ(a, b);

  std::vector<float> send = values(r, n * w), want(n), got(n);
  direct->reduce_scatter(dist::span_of(send.data(), send.size()), dist::span_of(want.data(), n), ReduceOp::kSum)->wait();
  staged.reduce_scatter(dist::span_of(send.data(), send.size()), dist::span_of(got.data(), n), ReduceOp::kSum)->wait();
  EXPECT_EQ(want, got);
  std::vector<float> in_place = values(r, n * w);  // the result lands in this rank's block
  staged.reduce_scatter(dist::span_of(in_place.data(), in_place.size()), dist::span_of(in_place.data() + r * n, n),
                        ReduceOp::kSum)->wait();
  EXPECT_EQ(std::vector<float>(in_place.begin() + r * n, in_place.begin() + (r + 1) * n), want);

  std::vector<float> gathered(n * w), mine = values(r, n);
  direct->all_gather(dist::span_of(mine.data(), n), dist::span_of(gathered.data(), gathered.size()))->wait();
  std::vector<float> staged_gather(n * w, 0);
  std::copy(mine.begin(), mine.end(), staged_gather.begin() + r * n);  // in place
  staged.all_gather(dist::span_of(staged_gather.data() + r * n, n), dist::span_of(staged_gather.data(), staged_gather.size()))->wait();
  EXPECT_EQ(gathered, staged_gather);

  std::vector<float> c = values(r, n);
  staged.broadcast(dist::span_of(c.data(), n), w - 1)->wait();
  EXPECT_EQ(c, values(w - 1, n));
  EXPECT_EQ(staged.all_reduce_value(r + 1.0, ReduceOp::kMax), static_cast<double>(w));
  // The host communicator's payload counts, seen through the wrapper (the host value's 8 bytes too).
  EXPECT_EQ(staged.stats().all_reduce_bytes, n * w * sizeof(float) + sizeof(double));
  EXPECT_EQ(staged.stats().reduce_scatter_bytes, 2 * n * w * sizeof(float));
  EXPECT_EQ(staged.stats().all_gather_bytes, n * w * sizeof(float));
  EXPECT_NE(staged.name().find("host-staged"), std::string::npos);
}

// Point-to-point through every wrapper the trainer stacks (timed, recording, staged): each rank sends
// 4 MB to the next while the previous sends to it. The sends must be in flight, not blocking (MPI's
// rendezvous: a blocking send waits for a receive that its peer posts only after its own send), and
// the recorder files them under the p2p group, naming the peer.
TEST_F(Staged, SendsAreInFlightThroughEveryWrapper) {
  if (w < 2) GTEST_SKIP() << "needs a peer";
  dist::CollectiveRing ring;
  dist::TimedCommunicator comm{std::make_unique<dist::RecordingCommunicator>(
      std::make_unique<dist::StagedCommunicator>(dist::make_mpi_communicator(test::world(), 10), device_copies(*be)), ring)};
  comm.set_context("ring");
  const std::size_t n = std::size_t{1} << 20;
  const std::vector<float> mine = values(r, n);
  std::vector<float> got(n, 0);
  auto sent = comm.send(dist::span_of(const_cast<float*>(mine.data()), n), (r + 1) % w, 0);
  auto received = comm.recv(dist::span_of(got.data(), n), (r + w - 1) % w, 0);
  received->wait();
  sent->wait();
  EXPECT_EQ(got, values((r + w - 1) % w, n));
  EXPECT_EQ(comm.stats().send_bytes, n * sizeof(float));
  const auto records = ring.snapshot();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].group, dist::CollGroup::kP2p);
  EXPECT_EQ(records[0].kind, dist::CollKind::kSend);
  EXPECT_EQ(std::string(records[0].context), cat("ring, to rank ", (r + 1) % w, " of ", w));
  EXPECT_EQ(records[1].kind, dist::CollKind::kRecv);
  EXPECT_EQ(records[1].state, dist::CollState::kDone);
}

TEST_F(Staged, SixteenBitWordsGatherAndBroadcastBitExactly) {
  const std::size_t n = 3;
  std::vector<std::uint16_t> mine(n), all(n * w);
  for (std::size_t i = 0; i < n; ++i) mine[i] = static_cast<std::uint16_t>(0xff80u + r * 16 + i);  // NaN patterns too
  for (dist::Communicator* c : {direct.get(), static_cast<dist::Communicator*>(&staged)}) {
    std::fill(all.begin(), all.end(), 0);
    c->all_gather({mine.data(), n, DType::kBF16}, {all.data(), all.size(), DType::kBF16})->wait();
    for (int q = 0; q < w; ++q)
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(all[q * n + i], 0xff80u + q * 16 + i) << c->name();
    std::vector<std::uint16_t> b = mine;
    c->broadcast({b.data(), n, DType::kF16}, 0)->wait();
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], 0xff80u + i) << c->name();
  }
}

// 16-bit sums pass through the staging to the MPI communicator's fp32 accumulation (test_communicator).
TEST_F(Staged, SixteenBitSumsGoThroughTheStaging) {
  std::vector<std::uint16_t> x(4, 0x3f80);  // bf16 1.0
  staged.all_reduce({x.data(), x.size(), DType::kBF16}, ReduceOp::kSum)->wait();
  for (std::uint16_t h : x) ASSERT_EQ(h, backend::f32_to_bf16(static_cast<float>(w)));
}

// The process grid's groups come from split: through both decorators, a child reduces over its group
// only, still host-staged, and keeps the parent's context for the watchdog.
TEST_F(Staged, SplitChildrenOfBothDecoratorsReduceOverTheirGroupOnly) {
  dist::TimedCommunicator timed{
      std::make_unique<dist::StagedCommunicator>(dist::make_mpi_communicator(test::world(), 60), device_copies(*be))};
  timed.set_context("tp groups");
  auto child = timed.split(r % 2, r);  // even ranks, odd ranks
  EXPECT_EQ(child->size(), (w + 1 - r % 2) / 2);
  EXPECT_EQ(child->rank(), r / 2);
  EXPECT_EQ(child->context(), "tp groups");
  EXPECT_NE(child->name().find("host-staged"), std::string::npos);
  std::vector<float> x{static_cast<float>(r)};
  child->all_reduce(dist::span_of(x.data(), 1), ReduceOp::kSum)->wait();
  float want = 0;
  for (int q = r % 2; q < w; q += 2) want += static_cast<float>(q);
  EXPECT_EQ(x[0], want);
}

}  // namespace
}  // namespace zt::train
