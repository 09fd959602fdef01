// The planner predicts the backend allocator's measured peak within 10% for every ZeRO stage and
// world size, by running real training steps of a small GPT-2; a plan that does not fit names fixes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <numeric>

#include "backend/backend.hpp"
#include "config/options.hpp"
#include "model/model.hpp"
#include "model/init.hpp"
#include "optim/zero/engine.hpp"
#include "optim/zero/model_adapters.hpp"
#include "plan/memory_plan.hpp"
#include "tests/mpi/mpi_test_world.hpp"

namespace zt::plan {
namespace {

config::Config small_config(int stage, int micro) {
  config::Config c;
  c.model.n_layer = 3;
  c.model.n_head = 4;
  c.model.n_embd = 64;
  c.model.vocab_size = 500;
  c.model.seq_len = 64;
  c.train.zero_stage = stage;
  c.train.micro_batch = micro;
  return c;
}

// The same size as a Llama: 2 K/V heads for 4 query heads, SwiGLU 160 wide, an untied head.
config::Config small_llama(int stage, int micro) {
  config::Config c = small_config(stage, micro);
  c.model.arch = config::Arch::kLlama;
  c.model.n_kv_head = 2;
  c.model.ffn_hidden = 160;
  return c;
}

// Two optimizer steps of two micro-batches each; returns the backend's peak bytes.
std::uint64_t measured_peak(const config::Config& c, int threads) {
  auto backend = backend::make_cpu_backend(threads);
  auto comm = dist::make_mpi_communicator(test::world(), 60);
  const model::ParamTable table(model::model_shape(c.model));
  const DType compute = model::compute_dtype(c.train.precision);
  const auto model = model::make_model(
      *backend, table, {.micro_batch = static_cast<int>(c.train.micro_batch), .recompute = c.train.recompute, .compute = compute});
  std::vector<optim::FlatRange> units;
  for (const auto& u : table.units()) units.push_back({static_cast<std::int64_t>(u.offset), static_cast<std::int64_t>(u.numel)});
  std::vector<optim::ParamRange> params;
  for (const auto& p : table.params()) params.push_back({{static_cast<std::int64_t>(p.offset), static_cast<std::int64_t>(p.numel)}, p.decay});
  optim::ZeroEngine engine(*backend, *comm, units, params, static_cast<int>(c.train.zero_stage), 25, {}, compute);
  engine.load_params([&](std::int64_t o, std::int64_t n, float* out) { model::init_params_range(table, 1, o, n, out); });
  optim::ZeroParams source(engine);
  optim::ZeroGrads sink(engine);
  std::vector<std::int32_t> tokens(c.train.micro_batch * 64);
  std::iota(tokens.begin(), tokens.end(), 0);
  for (auto& t : tokens) t %= 500;
  for (int step = 0; step < 2; ++step) {
    engine.zero_grads();
    for (int m = 0; m < 2; ++m) {
      engine.expect_access_order(optim::forward_backward_order(3, table.shape().tie_embeddings));
      model->forward(tokens.data(), tokens.data(), source);
      engine.begin_backward(m == 1);
      model->backward(source, sink, 1e-3f);
      engine.end_backward();
    }
    engine.finish_gradients();
    engine.adamw_step(c.optim, 1e-3, step + 1, 1.0);
  }
  return backend->memory_stats().peak_bytes;
}

TEST(MemoryPlan, PredictsTheMeasuredPeakWithinTenPercent) {
  const int world = test::world().size();
  for (int stage = 0; stage <= 3; ++stage)
    for (int micro : {1, 4}) {
      const config::Config c = small_config(stage, micro);
      const double measured = static_cast<double>(measured_peak(c, 1));
      const double predicted = static_cast<double>(plan_memory(c, world, 1, 0).total_bytes);
      EXPECT_NEAR(predicted / measured, 1.0, 0.10)
          << "stage " << stage << " micro " << micro << " world " << world << ": predicted " << predicted
          << " measured " << measured;
    }
}

TEST(MemoryPlan, PredictsRecomputationSavings) {
  for (config::Recompute r : {config::Recompute::kSelective, config::Recompute::kFull}) {
    config::Config c = small_config(1, 4);
    c.train.recompute = r;
    const double measured = static_cast<double>(measured_peak(c, 1));
    const double predicted = static_cast<double>(plan_memory(c, test::world().size(), 1, 0).total_bytes);
    EXPECT_NEAR(predicted / measured, 1.0, 0.10) << config::to_string(r);
    EXPECT_LT(predicted, plan_memory(small_config(1, 4), test::world().size(), 1, 0).total_bytes);
  }
}

TEST(MemoryPlan, PredictsMixedPrecisionWithinTenPercentAndBelowFp32) {
  for (config::Precision p : {config::Precision::kBf16, config::Precision::kFp16})
    for (int stage : {0, 3}) {
      config::Config c = small_config(stage, 4);
      c.train.precision = p;
      const double measured = static_cast<double>(measured_peak(c, 1));
      const double predicted = static_cast<double>(plan_memory(c, test::world().size(), 1, 0).total_bytes);
      EXPECT_NEAR(predicted / measured, 1.0, 0.10) << config::to_string(p) << " stage " << stage;
      EXPECT_LT(predicted, plan_memory(small_config(stage, 4), test::world().size(), 1, 0).total_bytes);
    }
}

TEST(MemoryPlan, PredictsLlamaWithinTenPercent) {
  for (config::Precision p : {config::Precision::kFp32, config::Precision::kBf16})
    for (int stage : {0, 3}) {
      config::Config c = small_llama(stage, 4);
      c.train.precision = p;
      const double measured = static_cast<double>(measured_peak(c, 1));
      const double predicted = static_cast<double>(plan_memory(c, test::world().size(), 1, 0).total_bytes);
      EXPECT_NEAR(predicted / measured, 1.0, 0.10) << config::to_string(p) << " stage " << stage;
    }
}

// ZeRO-Offload's rows off the device are what the engine holds there on either tier (host memory; the
// NVMe tier's buffers and file, read and written once a step), and the device total loses the state.
TEST(MemoryPlan, OffloadRowsAreWhatTheEngineHoldsOffTheDevice) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("zt_plan_offload_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto backend = backend::make_cpu_backend(1);
  auto comm = dist::make_mpi_communicator(test::world(), 60);
  for (int stage : {1, 3})
    for (bool nvme : {false, true}) {
      config::Config c = small_config(stage, 1);
      c.train.offload = config::Offload::kOptimizer;
      if (nvme) {
        c.offload.to = config::OffloadTo::kNvme;
        c.offload.nvme_dir = dir.string();
        c.offload.nvme_chunk_mb = 0.05;
      }
      const model::ParamTable table(model::model_shape(c.model));
      const optim::ZeroEngine engine(*backend, *comm, optim::units_of(table), optim::params_of(table), stage, 25,
                                     optim::offload_options(c, 1, comm->rank(), "model"));
      const optim::MemoryBreakdown held = engine.memory();
      const MemoryPlan p = plan_memory(c, comm->size(), 1, 0);
      std::map<std::string, std::uint64_t> rows;
      for (const PlanRow& r : p.offload_rows) rows[r.what] = r.bytes;
      const std::string at = cat("stage ", stage, nvme ? " nvme" : " host");
      EXPECT_EQ(rows.at(nvme ? "host: NVMe buffers" : "host: optimizer state"), held.host_optimizer) << at;
      EXPECT_EQ(p.nvme_bytes, held.nvme_optimizer) << at;
      if (nvme) {
        EXPECT_EQ(rows.at("NVMe file"), held.nvme_optimizer) << at;
        EXPECT_EQ(rows.at("NVMe traffic per step"), 2 * held.nvme_optimizer) << at;
        EXPECT_NE(format_plan(p, {}).find(dir.string() + "/rank_<r>/model.bin"), std::string::npos) << at;
      }
      EXPECT_LT(p.total_bytes, plan_memory(small_config(stage, 1), comm->size(), 1, 0).total_bytes) << at;
    }
  fs::remove_all(dir);
}

TEST(MemoryPlan, AConfigThatDoesNotFitNamesFixes) {
  config::Config c = small_config(0, 8);
  const std::uint64_t capacity = plan_memory(small_config(1, 2), 4, 1, 0).total_bytes;  // fits stage 1, micro 2
  const MemoryPlan p = plan_memory(c, 4, 1, capacity);
  EXPECT_FALSE(p.fits());
  const std::vector<std::string> fixes = suggestions(c, 4, 1, capacity);
  const std::string text = format_plan(p, fixes);
  EXPECT_NE(text.find("DOES NOT FIT"), std::string::npos) << text;
  EXPECT_NE(text.find("would fit with: train.zero_stage=1 with train.micro_batch=2"), std::string::npos) << text;
}

TEST(MemoryPlan, PlansModelsFarLargerThanTheMachineWithoutAllocating) {
  config::Config c;  // GPT-2 1.5B: 48 layers, 1600 wide, 1024 tokens
  c.model.n_layer = 48;
  c.model.n_head = 25;
  c.model.n_embd = 1600;
  c.model.seq_len = 1024;
  c.train.micro_batch = 4;
  c.train.zero_stage = 3;
  const MemoryPlan p64 = plan_memory(c, 64, 1, 0), p1 = plan_memory(c, 1, 1, 0);
  EXPECT_GT(p1.rows[0].bytes, 6'000'000'000ull);          // 1.56B fp32 parameters on one rank
  EXPECT_LT(p64.rows[0].bytes, p1.rows[0].bytes / 60);    // sharded over 64 ranks
}

}  // namespace
}  // namespace zt::plan
