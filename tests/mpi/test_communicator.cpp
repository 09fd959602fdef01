// The MPI communicator's collectives give the textbook results for 0, 1 and odd sizes, bf16/f16 sums
// are accumulated in fp32 and rounded once, and its watchdog turns a peer that does not arrive into a
// CommError naming the operation.
#include <gtest/gtest.h>

#include <numeric>
#include <thread>
#include <vector>

#include "backend/half.hpp"
#include "core/error.hpp"
#include "dist/communicator.hpp"
#include "tests/mpi/mpi_test_world.hpp"

namespace zt::dist {
namespace {

class CommunicatorTest : public ::testing::TestWithParam<std::size_t> {
 protected:
  std::unique_ptr<Communicator> comm = make_mpi_communicator(test::world(), 60);
  int r = comm->rank(), w = comm->size();
};

TEST_P(CommunicatorTest, AllReduceSumsEveryRank) {
  const std::size_t n = GetParam();
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(r * 1000 + i);
  comm->all_reduce(span_of(x.data(), n), ReduceOp::kSum)->wait();
  for (std::size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(x[i], 1000.f * w * (w - 1) / 2 + w * static_cast<float>(i));
}

TEST_P(CommunicatorTest, ReduceScatterGivesEachRankItsBlock) {
  const std::size_t n = GetParam();
  std::vector<float> send(n * w), recv(n, -1.f);
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(i + r);
  comm->reduce_scatter(span_of(send.data(), send.size()), span_of(recv.data(), n), ReduceOp::kSum)->wait();
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_FLOAT_EQ(recv[i], w * static_cast<float>(r * n + i) + static_cast<float>(w * (w - 1) / 2));
}

TEST_P(CommunicatorTest, AllGatherConcatenatesInRankOrder) {
  const std::size_t n = GetParam();
  std::vector<std::int32_t> send(n), recv(n * w, -1);
  for (std::size_t i = 0; i < n; ++i) send[i] = static_cast<std::int32_t>(r * 100 + i);
  comm->all_gather(span_of(send.data(), n), span_of(recv.data(), recv.size()))->wait();
  for (int q = 0; q < w; ++q)
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(recv[q * n + i], static_cast<std::int32_t>(q * 100 + i));
}

TEST_P(CommunicatorTest, BroadcastCopiesTheRootsBuffer) {
  const std::size_t n = GetParam();
  const int root = w - 1;
  std::vector<float> x(n, static_cast<float>(r));
  comm->broadcast(span_of(x.data(), n), root)->wait();
  for (float v : x) ASSERT_EQ(v, static_cast<float>(root));
}

INSTANTIATE_TEST_SUITE_P(Sizes, CommunicatorTest, ::testing::Values(0, 1, 7, 4099));

TEST(Communicator, ValueReductions) {
  auto comm = make_mpi_communicator(test::world(), 60);
  EXPECT_EQ(comm->all_reduce_value(comm->rank() + 1, ReduceOp::kMax), comm->size());
  EXPECT_EQ(comm->all_reduce_value(1.5, ReduceOp::kSum), 1.5 * comm->size());
}

TEST(Communicator, WatchdogNamesTheLateCollective) {
  auto comm = make_mpi_communicator(test::world(), 60);
  if (comm->size() < 2) GTEST_SKIP() << "needs a peer";
  comm->set_context("step 7 backward");
  float x = 1;
  if (comm->rank() == 0) {
    comm->set_timeout(0.3);
    auto work = comm->all_reduce(span_of(&x, 1), ReduceOp::kSum);
    try {
      work->wait();
      ADD_FAILURE() << "no CommError although the peers were 2 s late";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("all_reduce of 1 f32 did not complete within dist.timeout_s=0.3 s (step 7 backward)"),
                std::string::npos) << e.what();
    }
    comm->set_timeout(60);
    work->wait();  // the late peers arrive; the collective completes
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    comm->all_reduce(span_of(&x, 1), ReduceOp::kSum)->wait();
  }
  EXPECT_EQ(x, static_cast<float>(comm->size()));
}

// A collective issued in one phase and waited for in a later one (a gradient bucket of a micro-batch,
// waited for in the step's gradient reduction): the message names both, the issuing one being what the
// hang report names the collective by (its ring record), so the two agree on the phase.
TEST(Communicator, WatchdogNamesWhereTheCollectiveWasIssuedAndWaitedFor) {
  auto comm = make_mpi_communicator(test::world(), 60);
  if (comm->size() < 2) GTEST_SKIP() << "needs a peer";
  float x = 1;
  if (comm->rank() == 0) {
    comm->set_timeout(0.3);
    comm->set_context("step 3 micro-batch 2/2");
    auto work = comm->all_reduce(span_of(&x, 1), ReduceOp::kSum);
    comm->set_context("step 3 gradient reduction");
    try {
      work->wait();
      ADD_FAILURE() << "no CommError although the peers were 2 s late";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("all_reduce of 1 f32 did not complete within dist.timeout_s=0.3 s (step 3 "
                                           "gradient reduction; issued in step 3 micro-batch 2/2)"),
                std::string::npos) << e.what();
    }
    comm->set_timeout(60);
    work->wait();
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    comm->all_reduce(span_of(&x, 1), ReduceOp::kSum)->wait();
  }
  EXPECT_EQ(x, static_cast<float>(comm->size()));
}

}  // namespace
}  // namespace zt::dist

namespace zt::dist {
namespace {
TEST(Communicator, AllGatherInPlace) {
  auto comm = make_mpi_communicator(test::world(), 60);
  const int w = comm->size(), r = comm->rank();
  std::vector<float> buf(3 * w, -1.f);
  for (int i = 0; i < 3; ++i) buf[r * 3 + i] = static_cast<float>(r * 10 + i);
  comm->all_gather(span_of(buf.data() + r * 3, 3), span_of(buf.data(), buf.size()))->wait();
  for (int q = 0; q < w; ++q)
    for (int i = 0; i < 3; ++i) ASSERT_EQ(buf[q * 3 + i], static_cast<float>(q * 10 + i));
}
}  // namespace
}  // namespace zt::dist

namespace zt::dist {
namespace {
// bf16/f16 sums (tensor parallelism's activations): each element widened, summed over the ranks in fp32
// and rounded once. Rank 0 gives 256 + 4i (bf16 steps are 2 there) and every other rank 1 + i/64: at 4
// ranks 256 + 3 rounds to 260 once, where 16-bit partial sums would stay at 256 (each +1 is a tie).
std::uint16_t to16(DType t, float v) { return t == DType::kBF16 ? backend::f32_to_bf16(v) : backend::f32_to_f16(v); }
float from16(DType t, std::uint16_t h) { return t == DType::kBF16 ? backend::bf16_to_f32(h) : backend::f16_to_f32(h); }

TEST(Communicator, SixteenBitSumsAccumulateInFp32AndRoundOnce) {
  auto comm = make_mpi_communicator(test::world(), 60);
  const int w = comm->size(), r = comm->rank();
  const std::size_t n = 5;
  auto mine = [](DType t, int rank, std::size_t i) {
    return from16(t, to16(t, rank == 0 ? 256.f + 4.f * static_cast<float>(i) : 1.f + static_cast<float>(i) / 64.f));
  };
  for (DType t : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(t));
    auto want = [&](std::size_t i) {
      float sum = 0;
      for (int q = 0; q < w; ++q) sum += mine(t, q, i);  // exact in fp32 for these values
      return to16(t, sum);
    };
    std::vector<std::uint16_t> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = to16(t, mine(t, r, i));
    comm->all_reduce({x.data(), n, t}, ReduceOp::kSum)->wait();
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], want(i)) << "all_reduce [" << i << "]";
    // reduce_scatter: block q of every rank's send holds elements q*n ... (the i above is the index in
    // the block), out of place and in place (the result in this rank's block).
    for (bool in_place : {false, true}) {
      std::vector<std::uint16_t> send(n * w), recv(n, 0xffff);
      for (int q = 0; q < w; ++q)
        for (std::size_t i = 0; i < n; ++i) send[q * n + i] = to16(t, mine(t, r, i));
      std::uint16_t* out = in_place ? send.data() + r * n : recv.data();
      comm->reduce_scatter({send.data(), send.size(), t}, {out, n, t}, ReduceOp::kSum)->wait();
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], want(i)) << "reduce_scatter [" << i << "] in place " << in_place;
    }
  }
  EXPECT_EQ(comm->stats().all_reduce_bytes, 2 * n * sizeof(std::uint16_t));  // the 16-bit payload is what is counted
}

// A ring of point-to-point transfers (the pipeline's pattern: each rank sends to the next and receives
// from the previous, both in flight at once); messages between a pair arrive in the order sent.
TEST(Communicator, SendRecvAroundARingInOrder) {
  auto comm = make_mpi_communicator(test::world(), 60);
  const int w = comm->size(), r = comm->rank();
  if (w < 2) {
    float x = 1;
    EXPECT_THROW(comm->send(span_of(&x, 1), 0), CommError);  // no peer: itself is not one
    return;
  }
  const int next = (r + 1) % w, prev = (r + w - 1) % w;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{70000}}) {
    std::vector<float> a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<float>(r * 1000 + i), b[i] = a[i] + 0.5f;
    std::vector<float> got_a(n, -1.f), got_b(n, -1.f);
    auto s1 = comm->send(span_of(a.data(), n), next);
    auto s2 = comm->send(span_of(b.data(), n), next);
    auto r1 = comm->recv(span_of(got_a.data(), n), prev);
    auto r2 = comm->recv(span_of(got_b.data(), n), prev);
    r2->wait(), r1->wait(), s1->wait(), s2->wait();
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got_a[i], static_cast<float>(prev * 1000 + i));
      ASSERT_EQ(got_b[i], static_cast<float>(prev * 1000 + i) + 0.5f);
    }
  }
  EXPECT_EQ(comm->stats().send_bytes, 2 * 70001 * sizeof(float));
}

// Message streams (the interleaved pipeline's kinds and chunks): a receive takes its own stream's
// oldest message, whatever was sent before it on another stream; streams out of range are refused.
TEST(Communicator, StreamsKeepTheirOwnOrder) {
  auto comm = make_mpi_communicator(test::world(), 60);
  const int w = comm->size(), r = comm->rank();
  if (w < 2) GTEST_SKIP() << "needs a peer";
  const int next = (r + 1) % w, prev = (r + w - 1) % w;
  std::vector<float> out(3), in(3, -1.f);
  for (int s = 0; s < 3; ++s) out[static_cast<std::size_t>(s)] = static_cast<float>(r * 10 + s);
  std::vector<std::unique_ptr<dist::Work>> works;
  for (int s = 2; s >= 0; --s) works.push_back(comm->send(span_of(&out[static_cast<std::size_t>(s)], 1), next, 7 * s));
  for (int s = 0; s < 3; ++s) works.push_back(comm->recv(span_of(&in[static_cast<std::size_t>(s)], 1), prev, 7 * s));
  for (auto& work : works) work->wait();
  for (int s = 0; s < 3; ++s) EXPECT_EQ(in[static_cast<std::size_t>(s)], static_cast<float>(prev * 10 + s)) << "stream " << 7 * s;
  float x = 0;
  EXPECT_THROW(comm->send(span_of(&x, 1), next, dist::Communicator::kMaxStreams), CommError);
  EXPECT_THROW(comm->recv(span_of(&x, 1), prev, -1), CommError);
}

// A receive whose sender never sends ends by the deadline, naming the transfer and the context.
TEST(Communicator, WatchdogNamesTheMissingSend) {
  auto comm = make_mpi_communicator(test::world(), 60);
  if (comm->size() < 2) GTEST_SKIP() << "needs a peer";
  comm->set_context("step 3 pipeline forward micro-batch 2");
  float x = 0;
  if (comm->rank() == 0) {
    comm->set_timeout(0.3);
    auto work = comm->recv(span_of(&x, 1), 1);
    try {
      work->wait();
      ADD_FAILURE() << "no CommError although rank 1 sent 2 s late";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("recv of 1 f32 from rank 1 did not complete within dist.timeout_s=0.3 s "
                                           "(step 3 pipeline forward micro-batch 2)"),
                std::string::npos) << e.what();
    }
    comm->set_timeout(60);
    work->wait();
    EXPECT_EQ(x, 42.f);
  } else if (comm->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    x = 42;
    comm->send(span_of(&x, 1), 0)->wait();
  }
  comm->barrier();
}
}  // namespace
}  // namespace zt::dist
