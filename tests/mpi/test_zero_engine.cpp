// ZeRO stages 0-3 give the same parameters as one process applying AdamW to the sum of every rank's
// gradients, for any world size, with gradient accumulation; and hold the model-state bytes theory
// predicts (stage 3 on W ranks about 1/W of stage 0).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "backend/backend.hpp"
#include "backend/half.hpp"
#include "backend/host_convert.hpp"
#include "optim/zero/engine.hpp"
#include "tests/mpi/mpi_test_world.hpp"

namespace zt::optim {
namespace {

// Four units (odd sizes, one smaller than the world) holding six parameters.
std::vector<FlatRange> units() { return {{0, 10}, {10, 13}, {23, 3}, {26, 5}}; }
std::vector<ParamRange> params() {
  return {{{0, 8}, true}, {{8, 2}, false}, {{10, 12}, true}, {{22, 1}, false}, {{23, 3}, false}, {{26, 5}, true}};
}
constexpr int kParams = 31;

// The gradient rank r adds to element i in micro-batch m: deterministic, so every rank can
// compute the sum over ranks for the reference.
float grad_of(int rank, int micro, int i) { return std::sin(0.37f * i + 1.3f * rank + 0.71f * micro) * 0.1f; }

config::OptimConfig optim_config() {
  config::OptimConfig o;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  o.weight_decay = 0.1;
  return o;
}

// No offload, offload to host memory, offload to a file (NVMe tier) in a directory of this process.
std::filesystem::path scratch_dir() {
  return std::filesystem::temp_directory_path() / ("zt_zero_engine_" + std::to_string(::getpid()));
}
std::vector<OffloadOptions> offload_tiers() {
  std::filesystem::create_directories(scratch_dir());
  return {{}, {2, {}, 0}, {2, scratch_dir() / "rank_0" / "model.bin", 1024}};
}

// Runs `steps` optimizer steps; returns the full (master) parameters in flat order, and in `working`
// (if given) the compute-dtype parameters the model would read, as floats.
std::vector<float> train(int stage, int steps, int grad_accum, double* norm_out, DType compute = DType::kF32,
                         const OffloadOptions& offload = {}, std::vector<float>* working = nullptr) {
  auto backend = backend::make_cpu_backend(1);
  auto comm = dist::make_mpi_communicator(test::world(), 60);
  ZeroEngine engine(*backend, *comm, units(), params(), stage, {.bucket_mb = 0.00005}, offload, compute);
  std::vector<float> init(kParams);
  for (int i = 0; i < kParams; ++i) init[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  engine.load_params(init.data());
  const std::vector<int> backward_order = {3, 2, 1, 0};
  for (int step = 0; step < steps; ++step) {
    engine.zero_grads();
    for (int m = 0; m < grad_accum; ++m) {
      engine.expect_access_order(backward_order);
      engine.begin_backward(m == grad_accum - 1);
      for (int u : backward_order) {
        (void)engine.param_unit(u);
        const FlatRange unit = units()[u];
        const backend::Tensor g = engine.grad_unit(u);
        std::vector<float> host(unit.numel);
        backend->copy_to_host(host.data(), g.data, unit.numel * sizeof(float));
        for (int i = 0; i < unit.numel; ++i) host[i] += grad_of(comm->rank(), step * 10 + m, unit.offset + i);
        backend->copy_from_host(g.data, host.data(), unit.numel * sizeof(float));
        engine.release_param_unit(u);
        engine.grad_unit_done(u);
      }
      engine.end_backward();
    }
    *norm_out = engine.finish_gradients();
    engine.adamw_step(optim_config(), 1e-2, step + 1, 0.5);
  }
  std::vector<float> out(kParams);
  engine.gather_params(out.data());
  if (working) {
    working->assign(kParams, 0);
    engine.expect_access_order({});
    for (int u = 0; u < static_cast<int>(units().size()); ++u) {
      const backend::Tensor t = engine.param_unit(u);
      EXPECT_EQ(t.dtype, compute);
      backend::copy_to_host_as_f32(*backend, working->data() + units()[u].offset, t);
      engine.release_param_unit(u);
    }
  }
  return out;
}

// One process, double precision: AdamW on the sum over ranks and micro-batches.
std::vector<double> reference(int world, int steps, int grad_accum, double* norm_out) {
  std::vector<double> p(kParams), m(kParams, 0), v(kParams, 0);
  for (int i = 0; i < kParams; ++i) p[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  const auto o = optim_config();
  for (int step = 0; step < steps; ++step) {
    double sq = 0;
    std::vector<double> g(kParams, 0);
    for (int i = 0; i < kParams; ++i) {
      for (int r = 0; r < world; ++r)
        for (int mb = 0; mb < grad_accum; ++mb) g[i] += grad_of(r, step * 10 + mb, i);
      sq += g[i] * g[i];
    }
    *norm_out = std::sqrt(sq);
    const int t = step + 1;
    for (int i = 0; i < kParams; ++i) {
      bool decay = false;
      for (const ParamRange& pr : params())
        if (i >= pr.range.offset && i < pr.range.offset + pr.range.numel) decay = pr.decay;
      const double gi = g[i] * 0.5, lr = 1e-2;
      p[i] *= 1 - lr * (decay ? o.weight_decay : 0);
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * gi;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * gi * gi;
      const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(o.beta2, t)) + o.eps;
      p[i] -= lr / (1 - std::pow(o.beta1, t)) * m[i] / denom;
    }
  }
  return p;
}

class ZeroStages : public ::testing::TestWithParam<int> {};

TEST_P(ZeroStages, MatchSummedGradientAdamW) {
  const int stage = GetParam(), world = test::world().size();
  for (int grad_accum : {1, 3}) {
    double norm = 0, ref_norm = 0;
    const std::vector<float> got = train(stage, 4, grad_accum, &norm);
    const std::vector<double> want = reference(world, 4, grad_accum, &ref_norm);
    EXPECT_NEAR(norm, ref_norm, 1e-5 * ref_norm) << "stage " << stage << " accum " << grad_accum;
    for (int i = 0; i < kParams; ++i)
      ASSERT_NEAR(got[i], want[i], 2e-6 + 1e-5 * std::abs(want[i])) << "element " << i << " stage " << stage;
  }
}

// Mixed precision changes what the model reads, not the optimizer: with the same fp32 gradients the
// fp32 master comes out bit-identical to an fp32 run (with and without offload), and the working
// copy is exactly its rounding to the compute dtype, at every stage and world size.
TEST_P(ZeroStages, MixedPrecisionKeepsAnExactFp32Master) {
  const int stage = GetParam();
  double norm32 = 0;
  const std::vector<float> want = train(stage, 3, 2, &norm32);
  for (DType compute : {DType::kBF16, DType::kF16})
    for (const OffloadOptions& offload : offload_tiers()) {
      if (offload.threads > 0 && stage == 0) continue;  // train.offload needs stage >= 1
      double norm = 0;
      std::vector<float> working;
      const std::vector<float> got = train(stage, 3, 2, &norm, compute, offload, &working);
      EXPECT_EQ(norm, norm32);
      for (int i = 0; i < kParams; ++i) {
        ASSERT_EQ(got[i], want[i]) << "master element " << i << " " << dtype_name(compute) << " offload " << offload.threads << " " << offload.nvme_file;
        float rounded = 0;
        const std::uint16_t bits = compute == DType::kBF16 ? backend::f32_to_bf16(want[i]) : backend::f32_to_f16(want[i]);
        backend::host_to_f32(&bits, compute, &rounded, 1);
        ASSERT_EQ(working[i], rounded) << "working element " << i << " " << dtype_name(compute);
      }
    }
  std::filesystem::remove_all(scratch_dir());
}

INSTANTIATE_TEST_SUITE_P(Stage, ZeroStages, ::testing::Values(0, 1, 2, 3));

TEST(ZeroMemory, ModelStateShrinksWithTheStage) {
  auto backend = backend::make_cpu_backend(1);
  auto comm = dist::make_mpi_communicator(test::world(), 60);
  // A bigger model so that padding is negligible: 4 units of 1000 elements.
  std::vector<FlatRange> u = {{0, 1000}, {1000, 1000}, {2000, 1000}, {3000, 1000}};
  std::vector<ParamRange> p = {{{0, 4000}, true}};
  const int w = comm->size();
  std::size_t bytes[4];
  for (int stage = 0; stage < 4; ++stage) bytes[stage] = ZeroEngine(*backend, *comm, u, p, stage).memory().model_state();
  const double psi = 4000 * sizeof(float);
  EXPECT_NEAR(bytes[0], 4 * psi, 64);                  // params + grads + m + v
  EXPECT_NEAR(bytes[1], (2 + 2.0 / w) * psi, 64 * w);  // m, v sharded
  EXPECT_NEAR(bytes[2], (1 + 3.0 / w) * psi, 64 * w);  // + grads sharded
  EXPECT_NEAR(bytes[3], (4.0 / w) * psi, 64 * w);      // + params sharded
}

}  // namespace
}  // namespace zt::optim

namespace zt::optim {
namespace {
// Gradient reductions start while the backward pass is still running: right after a unit (stages
// 1-3) or a full bucket (stage 0) is reported done, not at the end of the pass. On one rank stages
// 0-1 skip them (in-place identities that would only cost a GPU synchronisation).
std::uint64_t reduced_bytes(const dist::Communicator& c) {
  return c.stats().all_reduce_bytes + c.stats().reduce_scatter_bytes;
}

TEST(ZeroOverlap, ReductionsStartAsUnitsComplete) {
  for (int stage = 0; stage <= 3; ++stage) {
    auto backend = backend::make_cpu_backend(1);
    auto comm = dist::make_mpi_communicator(test::world(), 60);
    // A 10-float bucket: at stage 0, units 3 and 2 (5 + 3 floats) wait; unit 1 (13) fills it.
    ZeroEngine engine(*backend, *comm, units(), params(), stage, {.bucket_mb = 40.0 / (1 << 20)});
    engine.zero_grads();
    engine.expect_access_order({3, 2, 1, 0});
    engine.begin_backward(true);
    std::vector<std::uint64_t> after;  // reduced bytes after each unit is reported done
    for (int u : {3, 2, 1}) {
      (void)engine.param_unit(u);
      (void)engine.grad_unit(u);
      engine.grad_unit_done(u);
      after.push_back(reduced_bytes(*comm));
    }
    if (stage <= 1 && comm->size() == 1) {
      EXPECT_EQ(after[2], 0u) << "stage " << stage << " on one rank ran identity reductions";
    } else if (stage == 0) {
      EXPECT_EQ(after[1], 0u) << "stage 0 launched a bucket before it was full";
      EXPECT_GT(after[2], 0u) << "stage 0 did not launch the full bucket during the pass";
    } else {
      EXPECT_GT(after[0], 0u) << "stage " << stage << ": unit 3 was not reduced as soon as it was done";
      EXPECT_GT(after[2], after[1]) << "stage " << stage;
    }
    (void)engine.grad_unit(0);
    engine.grad_unit_done(0);
    engine.end_backward();
    engine.finish_gradients();
  }
}
}  // namespace
}  // namespace zt::optim
