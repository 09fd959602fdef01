// The engine's checkpoint views: what each rank copies out over its slices of the W-rank partition
// (whatever the stage) loads into an engine of any stage, and both then hold exactly the same master
// weights and AdamW moments; one more step keeps them in step.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
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
  explicit Rig(int stage, const OffloadOptions& offload = {}) : engine(*backend, *comm, units(), params(), stage, {.bucket_mb = 0.00005}, offload) {}

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

// ZeRO-Offload keeps the same state as the device after the same steps, on either tier, and what the
// NVMe tier saves (a checkpoint) loads into an NVMe-tier engine that then steps in step: bit for bit.
TEST(EngineStateOffload, NvmeTierSavesLoadsAndStepsLikeTheDevice) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("zt_engine_state_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto nvme = [&](const char* name) { return OffloadOptions{1, dir / "rank_0" / (std::string(name) + ".bin"), 1024}; };
  std::vector<float> init(kParams);
  for (int i = 0; i < kParams; ++i) init[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  for (int stage : {1, 3}) {
    Rig device(stage), host(stage, {1, {}, 0}), disk(stage, nvme("a"));
    for (Rig* r : {&device, &host, &disk}) {
      r->engine.load_params(init.data());
      for (int s = 0; s < 2; ++s) r->step(s);
    }
    for (State s : {State::kMaster, State::kExpAvg, State::kExpAvgSq}) {
      EXPECT_EQ(host.saved(s), device.saved(s)) << "stage " << stage;
      EXPECT_EQ(disk.saved(s), device.saved(s)) << "stage " << stage;
    }
    Rig resumed(stage, nvme("b"));
    const std::vector<float> master = disk.saved(State::kMaster), m = disk.saved(State::kExpAvg), v = disk.saved(State::kExpAvgSq);
    resumed.engine.load_params(master.data());
    resumed.engine.load_moments([&](State s, std::int64_t offset, std::int64_t count, float* out) {
      const std::vector<float>& src = s == State::kExpAvg ? m : v;
      std::copy(src.begin() + offset, src.begin() + offset + count, out);
    });
    device.step(2);
    resumed.step(2);
    std::vector<float> want(kParams), got(kParams);
    device.engine.gather_params(want.data());
    resumed.engine.gather_params(got.data());
    EXPECT_EQ(got, want) << "stage " << stage;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zt::optim
