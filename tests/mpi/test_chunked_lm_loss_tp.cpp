// The chunked LM loss under tensor parallelism (layers/chunked_lm_loss.hpp with a RowReduce over the
// world as the TP group): every rank holds ceil(Vp/tp) head rows (the last shard's rows past the real ids
// padding, at tp=3 also rows past Vp), and the losses equal one rank's within fp32 rounding, the group's
// sum of d(input) one rank's, each rank's d(weight) its rows of one rank's (the TP model tests compare
// the whole model, whose vocabulary-parallel loss this is, with one rank's). Entropies (RL's entropy
// bonus) and their gradient likewise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "layers/chunked_lm_loss.hpp"
#include "tests/mpi/mpi_test_world.hpp"

namespace zt::layers {
namespace {

using backend::Tensor;
using backend::WeightLayout;

constexpr std::int64_t N = 11, C = 16, Vp = 64, V = 50;

std::vector<float> random_values(std::size_t n, unsigned seed, float sd) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

Tensor view(std::vector<float>& v, std::initializer_list<std::int64_t> dims) { return {v.data(), DType::kF32, dims}; }

double norm_error(const std::vector<double>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

class ChunkedLmLossTp : public ::testing::Test {
 protected:
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  std::unique_ptr<dist::Communicator> group = dist::make_mpi_communicator(test::world(), 60);
  const int tp = group->size(), r = group->rank();
  const std::int64_t Vs = (Vp + tp - 1) / tp, lo = r * Vs;
  std::vector<float> x = random_values(N * C, 1, 1.0f), w = random_values(Vp * C, 2, 0.7f);
  std::vector<std::int32_t> targets{0, 49, 7, backend::kIgnoreTarget, 23, 48, 1, 35, 44, 12, 30};
  const float dloss = 0.25f;
  RowReduce reduce{[this](std::span<double> v) { group->all_reduce_values(v, dist::ReduceOp::kMax); },
                   [this](std::span<double> v) { group->all_reduce_values(v, dist::ReduceOp::kSum); }};

  // This rank's head rows [lo, lo + Vs), zero past Vp.
  std::vector<float> shard(const std::vector<float>& full) const {
    std::vector<float> s(Vs * C, 0.f);
    for (std::int64_t i = 0; i < Vs && lo + i < Vp; ++i)
      std::copy_n(full.begin() + (lo + i) * C, C, s.begin() + i * C);
    return s;
  }
};

TEST_F(ChunkedLmLossTp, EqualsOneRankForAnyChunk) {
  std::vector<float> dx1(N * C), dw1(Vp * C, 0.f);
  ChunkedLmLoss one(*be, Vp);  // one rank, one chunk: today's head
  const std::vector<float> want = one.forward(view(x, {N, C}), view(w, {Vp, C}), targets.data(), 0, V);
  one.backward(view(dx1, {N, C}), view(dw1, {Vp, C}), view(x, {N, C}), view(w, {Vp, C}), dloss);
  for (std::int64_t chunk : {Vs, std::int64_t{5}, std::int64_t{1}}) {
    SCOPED_TRACE(cat("tp=", tp, " rank ", r, " chunk ", chunk));
    std::vector<float> wr = shard(w), dx(N * C), dw(Vs * C, 0.f);
    ChunkedLmLoss loss(*be, chunk);
    const std::vector<float> got = loss.forward(view(x, {N, C}), view(wr, {Vs, C}), targets.data(), lo, V, &reduce);
    for (std::int64_t n = 0; n < N; ++n) EXPECT_NEAR(got[n], want[n], 2e-6 * std::abs(want[n])) << "row " << n;
    loss.backward(view(dx, {N, C}), view(dw, {Vs, C}), view(x, {N, C}), view(wr, {Vs, C}), dloss);
    std::vector<double> dx_sum(dx.begin(), dx.end());
    group->all_reduce_values(dx_sum, dist::ReduceOp::kSum);  // what the model's all-reduce / reduce-scatter does
    EXPECT_LT(norm_error(dx_sum, dx1), 1e-6) << "d(input) summed over the group";
    const std::int64_t mine = std::max<std::int64_t>(0, std::min(Vs, Vp - lo));
    std::vector<double> dw_rows(dw.begin(), dw.begin() + mine * C);
    const std::vector<float> dw1_rows(dw1.begin() + lo * C, dw1.begin() + (lo + mine) * C);
    if (lo < V) {
      EXPECT_LT(norm_error(dw_rows, dw1_rows), 1e-6) << "d(weight), this rank's rows";
    }
    for (std::int64_t i = std::max<std::int64_t>(0, V - lo) * C; i < Vs * C; ++i)
      ASSERT_EQ(dw[i], 0.f) << "padding rows get no gradient";
  }
}

TEST_F(ChunkedLmLossTp, EntropiesEqualOneRanks) {
  std::vector<float> dx1(N * C), dw1(Vp * C, 0.f), s(N), e(N);
  for (std::int64_t n = 0; n < N; ++n) s[n] = 0.5f - 0.3f * static_cast<float>(n % 3), e[n] = 0.9f - 0.4f * static_cast<float>(n % 4);
  ChunkedLmLoss one(*be, Vp);
  one.forward(view(x, {N, C}), view(w, {Vp, C}), targets.data(), 0, V, nullptr, true);
  const std::vector<float> want = one.entropies();
  one.backward(view(dx1, {N, C}), view(dw1, {Vp, C}), view(x, {N, C}), view(w, {Vp, C}), dloss, view(s, {N}), view(e, {N}));
  for (std::int64_t chunk : {Vs, std::int64_t{5}}) {
    SCOPED_TRACE(cat("tp=", tp, " rank ", r, " chunk ", chunk));
    std::vector<float> wr = shard(w), dx(N * C), dw(Vs * C, 0.f);
    ChunkedLmLoss loss(*be, chunk);
    loss.forward(view(x, {N, C}), view(wr, {Vs, C}), targets.data(), lo, V, &reduce, true);
    const std::vector<float>& got = loss.entropies();
    ASSERT_EQ(got.size(), want.size());
    for (std::int64_t n = 0; n < N; ++n) EXPECT_NEAR(got[n], want[n], 2e-6 * std::abs(want[n])) << "row " << n;
    loss.backward(view(dx, {N, C}), view(dw, {Vs, C}), view(x, {N, C}), view(wr, {Vs, C}), dloss, view(s, {N}), view(e, {N}));
    std::vector<double> dx_sum(dx.begin(), dx.end());
    group->all_reduce_values(dx_sum, dist::ReduceOp::kSum);
    EXPECT_LT(norm_error(dx_sum, dx1), 1e-5) << "d(input) summed over the group";
    const std::int64_t mine = std::max<std::int64_t>(0, std::min(Vs, V - lo));
    if (mine == 0) continue;
    std::vector<double> dw_rows(dw.begin(), dw.begin() + mine * C);
    const std::vector<float> dw1_rows(dw1.begin() + lo * C, dw1.begin() + (lo + mine) * C);
    EXPECT_LT(norm_error(dw_rows, dw1_rows), 1e-5) << "d(weight), this rank's rows";
  }
}

}  // namespace
}  // namespace zt::layers
