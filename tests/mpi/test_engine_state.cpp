// The engine's checkpoint views: what each rank copies out over its slices of the W-rank partition
// (whatever the stage) loads into an engine of any stage, and both then hold exactly the same master
// weights and AdamW moments; one more step keeps them in step.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/backend.hpp"
#include "optim/zero/engine.hpp"
#include "tests/mpi/mpi_test_world.hpp"

namespace zt::optim {
namespace {
using State = ZeroEngine::State;

std::vector<FlatRange> units() { return {{0, 10}, {10, 13}, {23, 3}, {26, 5}}; }
std::vector<ParamRange> params() {
  return {{{0, 8}, true}, {{8, 2}, false}, {{10, 12}, true}, {{22, 1}, false}, {{23, 3}, false}, {{26, 5}, true}};
}
constexpr int kParams = 31;

struct Rig {
  std::unique_ptr<backend::Backend> backend = backend::make_cpu_backend(1);
  std::unique_ptr<dist::Communicator> comm = dist::make_mpi_communicator(test::world(), 60);
  ZeroEngine engine;
  explicit Rig(int stage) : engine(*backend, *comm, units(), params(), stage, 0.00005) {}

  void step(int step) {  // one optimizer step on deterministic gradients
    engine.zero_grads();
    engine.expect_access_order({3, 2, 1, 0});
    engine.begin_backward(true);
    for (int u : {3, 2, 1, 0}) {
      (void)engine.param_unit(u);
      const backend::Tensor g = engine.grad_unit(u);
      std::vector<float> host(units()[u].numel);
      for (int i = 0; i < units()[u].numel; ++i)
        host[i] = std::sin(0.37f * (units()[u].offset + i) + 1.3f * comm->rank() + 0.71f * step) * 0.1f;
      backend->copy_from_host(g.data, host.data(), host.size() * sizeof(float));
      engine.release_param_unit(u);
      engine.grad_unit_done(u);
    }
    engine.end_backward();
    engine.finish_gradients();
    config::OptimConfig o;
    engine.adamw_step(o, 1e-2, step + 1, 1.0);
  }

  // Every rank's slices of the W-rank partition, summed over ranks into full flat copies.
  std::vector<float> saved(State s) {
    const Partition part(units(), params(), comm->size(), comm->rank());
    std::vector<float> full(kParams, 0.0f);
    for (int u = 0; u < part.n_units(); ++u) {
      const FlatRange r = part.owned(u, comm->rank());
      if (r.numel == 0) continue;
      EXPECT_TRUE(engine.holds(s, r));
      engine.copy_state_to_host(s, r, full.data() + r.offset);
    }
    comm->all_reduce(dist::span_of(full.data(), full.size()), dist::ReduceOp::kSum)->wait();
    return full;
  }
};

class EngineState : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(EngineState, SavedSlicesLoadIntoAnyStage) {
  const auto [from, to] = GetParam();
  Rig a(from), b(to);
  std::vector<float> init(kParams);
  for (int i = 0; i < kParams; ++i) init[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  a.engine.load_params(init.data());
  for (int s = 0; s < 2; ++s) a.step(s);
  const std::vector<float> master = a.saved(State::kMaster), m = a.saved(State::kExpAvg), v = a.saved(State::kExpAvgSq);
  b.engine.load_params(master.data());
  b.engine.load_moments([&](State s, std::int64_t offset, std::int64_t count, float* out) {
    const std::vector<float>& src = s == State::kExpAvg ? m : v;
    std::copy(src.begin() + offset, src.begin() + offset + count, out);
  });
  EXPECT_EQ(b.saved(State::kMaster), master);
  EXPECT_EQ(b.saved(State::kExpAvg), m);
  EXPECT_EQ(b.saved(State::kExpAvgSq), v);
  a.step(2);
  b.step(2);
  std::vector<float> pa(kParams), pb(kParams);
  a.engine.gather_params(pa.data());
  b.engine.gather_params(pb.data());
  for (int i = 0; i < kParams; ++i) ASSERT_NEAR(pa[i], pb[i], 1e-6f * (1 + std::abs(pa[i]))) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(FromTo, EngineState, ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(0, 1, 2, 3)));

TEST(EngineStateViews, RefusesRangesThisRankDoesNotHold) {
  Rig r(3);
  if (r.comm->size() == 1) GTEST_SKIP() << "one rank holds everything";
  const Partition part(units(), params(), r.comm->size(), r.comm->rank());
  const FlatRange other = part.owned(1, (r.comm->rank() + 1) % r.comm->size());
  if (other.numel > 0) {
    EXPECT_FALSE(r.engine.holds(State::kExpAvg, other));
  }
  EXPECT_FALSE(r.engine.holds(State::kMaster, {8, 4}));  // spans two units
  std::vector<float> out(4);
  EXPECT_THROW(r.engine.copy_state_to_host(State::kMaster, {8, 4}, out.data()), Error);
}

}  // namespace
}  // namespace zt::optim
