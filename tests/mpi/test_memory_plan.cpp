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
#include "optim/zero/transients.hpp"
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

struct Measured {
  std::uint64_t peak = 0;        // the backend's peak bytes
  std::uint64_t transients = 0;  // the engine's transient buffers at their peak
  double grad_norm = 0;          // the last step's
  std::vector<double> losses;    // every micro-batch's
  std::vector<float> logits;     // after the steps (a split head assembled whole for them)
};

// Two optimizer steps of two micro-batches each (with offload: the engine's offload, as the trainer sets it).
Measured measure(const config::Config& c, int threads, const optim::OffloadOptions& offload = {}) {
  auto backend = backend::make_cpu_backend(threads);
  auto comm = dist::make_mpi_communicator(test::world(), 60);
  const model::ParamTable table(model::model_shape(c.model));
  const DType compute = model::compute_dtype(c.train.precision);
  const auto model = model::make_model(*backend, table,
                                       {.micro_batch = static_cast<int>(c.train.micro_batch), .recompute = c.train.recompute,
                                        .compute = compute, .loss_chunk = c.train.loss_chunk});
  // As the trainer wires it: the head in pieces where zero.split_vocab splits it.
  const optim::EngineUnits units = optim::decoder_engine_units(c, table, 0);
  optim::ZeroEngine engine(*backend, *comm, units.ranges, optim::params_of(table), static_cast<int>(c.train.zero_stage),
                           optim::ZeroOptions::from(c.zero), offload, compute);
  engine.load_params([&](std::int64_t o, std::int64_t n, float* out) { model::init_params_range(table, 1, o, n, out); });
  optim::ZeroParams source(engine, &units);
  optim::ZeroGrads sink(engine, &units);
  std::vector<std::int32_t> tokens(c.train.micro_batch * 64);
  std::iota(tokens.begin(), tokens.end(), 0);
  for (auto& t : tokens) t = (t * 37) % static_cast<std::int32_t>(c.model.vocab_size);  // ids across the vocabulary
  double norm = 0;
  std::vector<double> losses;
  for (int step = 0; step < 2; ++step) {
    engine.zero_grads();
    for (int m = 0; m < 2; ++m) {
      engine.expect_access_order(optim::forward_backward_order(3, table.shape().tie_embeddings, units));
      losses.push_back(model->forward(tokens.data(), tokens.data(), source));
      engine.begin_backward(m == 1);
      model->backward(source, sink, 1e-3f);
      engine.end_backward();
    }
    norm = engine.finish_gradients();
    engine.adamw_step(c.optim, 1e-3, step + 1, 1.0);
  }
  const std::uint64_t peak = backend->memory_stats().peak_bytes, transients = engine.memory().comm_buffers_peak;
  engine.expect_access_order(optim::forward_order(3, table.shape().tie_embeddings, units));
  return {peak, transients, norm, losses, model->forward_logits(tokens.data(), source)};
}
std::uint64_t measured_peak(const config::Config& c, int threads) { return measure(c, threads).peak; }

// The planner's replay of the engine's transients for c (optim/zero/transients.hpp).
std::uint64_t replayed_transients(const config::Config& c, int world) {
  const model::ParamTable table(model::model_shape(c.model));
  const int stage = static_cast<int>(c.train.zero_stage), L = table.shape().n_layer;
  const bool tied = table.shape().tie_embeddings;
  const optim::EngineUnits units = optim::decoder_engine_units(c, table, 0);
  const optim::Partition part(units.ranges, optim::params_of(table), world, 0);
  return optim::transient_peak_bytes(part, stage, model::compute_dtype(c.train.precision), optim::ZeroOptions::from(c.zero),
                                     false, optim::forward_backward_order(L, tied, units),
                                     optim::decoder_calls(L, tied, true, units));
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

// train.offload=params: the device holds gathered units only; the plan's device total is the peak.
TEST(MemoryPlan, PredictsTheMeasuredPeakWithParametersOffloaded) {
  const int world = test::world().size();
  for (int micro : {1, 4}) {
    config::Config c = small_config(3, micro);
    c.train.offload = config::Offload::kParams;
    const double measured = static_cast<double>(measure(c, 1, optim::offload_options(c, 1, 0, "model")).peak);
    const double predicted = static_cast<double>(plan_memory(c, world, 1, 0).total_bytes);
    EXPECT_NEAR(predicted / measured, 1.0, 0.10) << "micro " << micro << " world " << world << ": predicted " << predicted
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
    for (bool nvme : {false, true})
    for (config::Offload what : {config::Offload::kOptimizer, config::Offload::kParams}) {
      if (what == config::Offload::kParams && stage != 3) continue;
      config::Config c = small_config(stage, 1);
      c.train.offload = what;
      if (nvme) {
        c.offload.to = config::OffloadTo::kNvme;
        c.offload.nvme_dir = dir.string();
        c.offload.nvme_chunk_mb = 0.05;
      }
      const model::ParamTable table(model::model_shape(c.model));
      const optim::ZeroEngine engine(*backend, *comm, optim::units_of(table), optim::params_of(table), stage, {},
                                     optim::offload_options(c, 1, comm->rank(), "model"));
      const optim::MemoryBreakdown held = engine.memory();
      const MemoryPlan p = plan_memory(c, comm->size(), 1, 0);
      std::map<std::string, std::uint64_t> rows;
      for (const PlanRow& r : p.offload_rows) rows[r.what] = r.bytes;
      const std::string at = cat("stage ", stage, nvme ? " nvme " : " host ", config::to_string(what));
      EXPECT_EQ(rows.at(nvme ? "host: NVMe buffers" : "host: optimizer state"), held.host_optimizer) << at;
      EXPECT_EQ(p.nvme_bytes, held.nvme_optimizer + held.nvme_params) << at;
      EXPECT_EQ(p.host_bytes, held.host_optimizer + held.host_params) << at;
      if (what == config::Offload::kParams) {
        EXPECT_GT(held.host_params, 0u) << at;
        EXPECT_EQ(rows.at(nvme ? "host: NVMe param bufs" : "host: parameters"), held.host_params) << at;
        if (nvme) {
          EXPECT_EQ(rows.at("NVMe file, parameters"), held.nvme_params) << at;
          EXPECT_NE(format_plan(p, {}).find(dir.string() + "/rank_<r>/model.params.bin"), std::string::npos) << at;
        }
        EXPECT_EQ(held.params, 0u) << at;
        config::Config optimizer_only = c;
        optimizer_only.train.offload = config::Offload::kOptimizer;
        EXPECT_LT(p.total_bytes, plan_memory(optimizer_only, comm->size(), 1, 0).total_bytes) << at;
      }
      if (nvme) {
        EXPECT_EQ(rows.at("NVMe file"), held.nvme_optimizer) << at;
        EXPECT_EQ(rows.at("NVMe traffic per step"), 2 * held.nvme_optimizer) << at;
        EXPECT_NE(format_plan(p, {}).find(dir.string() + "/rank_<r>/model.bin"), std::string::npos) << at;
      }
      EXPECT_LT(p.total_bytes, plan_memory(small_config(stage, 1), comm->size(), 1, 0).total_bytes) << at;
    }
  fs::remove_all(dir);
}

// (On a GPU's plan: the CPU's outside-the-allocator term grows with the ZeRO stage and would reorder them.)
TEST(MemoryPlan, AConfigThatDoesNotFitNamesFixes) {
  const config::Device gpu = config::Device::kCuda;
  config::Config c = small_config(0, 8);
  const std::uint64_t capacity = plan_memory(small_config(1, 2), 4, 1, 0, gpu).device_peak();  // fits stage 1, micro 2
  const MemoryPlan p = plan_memory(c, 4, 1, capacity, gpu);
  EXPECT_FALSE(p.fits());
  const std::vector<std::string> fixes = suggestions(c, 4, 1, capacity, gpu);
  const std::string text = format_plan(p, fixes);
  EXPECT_NE(text.find("DOES NOT FIT"), std::string::npos) << text;
  EXPECT_NE(text.find("would fit with: train.zero_stage=1 with train.micro_batch=2"), std::string::npos) << text;
}

// A model whose optimizer state is what does not fit on 16 GB GPUs: --plan names the cheapest offload
// tier that fits, host memory where the node's plan.host_memory_gb holds the state, else NVMe, with
// each tier's footprint; the host check itself says whether a host-offload plan fits.
TEST(MemoryPlan, NamesTheCheapestOffloadTierThatFits) {
  config::Config c;  // GPT-2 1.5B's shape on 2 GPUs of 16 GiB, bf16, full recompute
  c.model.n_layer = 48;
  c.model.n_head = 25;
  c.model.n_embd = 1600;
  c.model.seq_len = 1024;
  c.train.micro_batch = 1;
  c.train.zero_stage = 1;
  c.train.precision = config::Precision::kBf16;
  c.train.recompute = config::Recompute::kFull;
  c.plan.gpus_per_node = 2;
  const std::uint64_t gpu = 16ull << 30;
  ASSERT_FALSE(plan_memory(c, 2, 1, gpu, config::Device::kCuda).fits());
  c.plan.host_memory_gb = 512;
  auto fixes = [&] {
    std::string all;
    for (const std::string& f : suggestions(c, 2, 1, gpu, config::Device::kCuda)) all += f + "\n";
    return all;
  };
  const std::string roomy = fixes();
  EXPECT_NE(roomy.find("train.offload=optimizer with train.zero_stage=1 (the cheapest tier: host memory"), std::string::npos) << roomy;
  c.plan.host_memory_gb = 8;  // 4 GiB a rank: the 1.5B model's 12 GiB of state per rank does not fit there
  const std::string tight = fixes();
  EXPECT_EQ(tight.find("the cheapest tier: host memory"), std::string::npos) << tight;
  EXPECT_NE(tight.find("offload.to=nvme offload.nvme_dir=DIR (a node-local disk) with train.zero_stage=1"), std::string::npos) << tight;

  c.train.offload = config::Offload::kOptimizer;  // host offload planned against that node: the host check fails
  const MemoryPlan host = plan_memory(c, 2, 1, gpu, config::Device::kCuda);
  EXPECT_TRUE(host.device_fits());
  EXPECT_FALSE(host.host_fits());
  EXPECT_NE(format_plan(host, {}).find("host memory per rank"), std::string::npos);
  EXPECT_NE(fixes().find("offload.to=nvme"), std::string::npos);
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

// The plan's transient row is the engine's own count: the replay equals the engine's peak of transient
// buffers for GPT-2 (tied head) and Llama (untied; its head whole, or split into 4 loss chunks by
// zero.split_vocab), stages 2-3, fp32 and bf16, gradients reduced in fp32 or the compute dtype, a bucket
// of one unit or of many, the tied head's share reduced early or not.
TEST(ZeroTransients, ThePlansReplayIsTheEnginesPeak) {
  const int world = test::world().size();
  for (int family : {0, 1, 2})  // GPT-2, Llama, Llama with a split head
    for (int stage : {2, 3})
      for (config::Precision p : {config::Precision::kFp32, config::Precision::kBf16})
        for (bool in_compute : {false, true})
          for (double bucket : {25.0, 0.01})
            for (bool early : {true, false}) {
              if ((in_compute && p == config::Precision::kFp32) || (family > 0 && !early)) continue;
              config::Config c = family > 0 ? small_llama(stage, 2) : small_config(stage, 2);
              if (family == 2) c.train.loss_chunk = 128;
              c.train.precision = p;
              c.zero.reduce_dtype = in_compute ? config::ReduceDtype::kCompute : config::ReduceDtype::kFp32;
              c.zero.bucket_mb = bucket;
              c.zero.reduce_tied_early = early ? config::TiedReduce::kTrue : config::TiedReduce::kFalse;
              const Measured m = measure(c, 1);
              EXPECT_GT(m.transients, 0u);
              EXPECT_EQ(replayed_transients(c, world), m.transients)
                  << "family " << family << " stage " << stage << " " << config::to_string(p) << " reduce in "
                  << (in_compute ? "compute" : "fp32") << " bucket " << bucket << " early " << early;
            }
}

// zero.split_vocab: an untied model whose loss takes the vocabulary in chunks gathers and reduces its
// embedding and head chunk by chunk, so the engine's transients lose most of the two tables' gathered
// weights and fp32 gradients; the same training, bit for bit (the same chunks, each element reduced over
// the same ranks), the plan's replay still the engine's peak, and the logits (the head's pieces copied
// together) the same.
TEST(ZeroTransients, ASplitHeadHoldsLessForTheSameTraining) {
  for (int stage : {2, 3})
    for (config::Precision p : {config::Precision::kFp32, config::Precision::kBf16}) {
      config::Config c = small_llama(stage, 2);
      c.model.vocab_size = 4000;  // the head the largest unit, as in real models (256k of the 370k parameters)
      c.train.loss_chunk = 512;
      c.train.precision = p;
      c.zero.split_vocab = false;
      const Measured whole = measure(c, 1);
      c.zero.split_vocab = true;
      const Measured split = measure(c, 1);
      const std::string what = cat("stage ", stage, " ", config::to_string(p));
      EXPECT_LT(static_cast<double>(split.transients), 0.6 * static_cast<double>(whole.transients)) << what;
      EXPECT_LT(split.peak, whole.peak) << what;
      EXPECT_EQ(split.losses, whole.losses) << what;
      EXPECT_EQ(split.grad_norm, whole.grad_norm) << what;
      EXPECT_EQ(split.logits, whole.logits) << what << ": the logits through the head's pieces assembled";
      EXPECT_EQ(replayed_transients(c, test::world().size()), split.transients) << what;
      const double predicted = static_cast<double>(plan_memory(c, test::world().size(), 1, 0).total_bytes);
      EXPECT_NEAR(predicted / static_cast<double>(split.peak), 1.0, 0.10) << what;
    }
}

// A plan that misses by what ZeRO's transient buffers hold names the zero.* keys that bound them: with
// the capacity at what the plan needs with both, a run with neither is refused with each named.
TEST(ZeroTransients, APlanThatMissesByTheBuffersNamesTheirKeys) {
  config::Config c = small_llama(3, 2);
  c.model.vocab_size = 4000;
  c.train.loss_chunk = 512;
  c.train.precision = config::Precision::kBf16;
  c.zero.reduce_dtype = config::ReduceDtype::kCompute;
  const std::uint64_t capacity = plan_memory(c, 2, 1, 0).device_peak();  // the step's, or loading's
  c.zero.reduce_dtype = config::ReduceDtype::kFp32;
  c.zero.split_vocab = false;
  ASSERT_FALSE(plan_memory(c, 2, 1, capacity).fits());
  std::string all;
  for (const std::string& f : suggestions(c, 2, 1, capacity)) all += f + "\n";
  EXPECT_NE(all.find("zero.split_vocab=true zero.reduce_dtype=compute (ZeRO's transient buffers)"), std::string::npos) << all;
  c.zero.reduce_dtype = config::ReduceDtype::kCompute;  // one lever left
  all.clear();
  for (const std::string& f : suggestions(c, 2, 1, capacity)) all += f + "\n";
  EXPECT_NE(all.find("zero.split_vocab=true (ZeRO's transient buffers)"), std::string::npos) << all;
}

// A tied head's share of the embedding's gradient reduced as soon as the head is done: the embedding's
// fp32 gradient is not held through the backward (fewer transient bytes), the same reduced gradient.
TEST(ZeroTransients, ATiedHeadsShareReducedEarlyHoldsLessForTheSameGradient) {
  for (int stage : {2, 3}) {
    config::Config c = small_config(stage, 2);
    c.model.vocab_size = 1000;  // the embedding the largest unit, a block's size or more, as in real models
    c.zero.reduce_tied_early = config::TiedReduce::kFalse;
    const Measured at_end = measure(c, 1);
    c.zero.reduce_tied_early = config::TiedReduce::kTrue;
    const Measured early = measure(c, 1);
    EXPECT_LT(early.transients, at_end.transients) << "stage " << stage;
    EXPECT_NEAR(early.grad_norm / at_end.grad_norm, 1.0, 1e-6) << "stage " << stage;
  }
}

// Gradients reduced in bf16: half the bytes in flight, the fp32 unit gradient freed at once; the reduced
// gradient differs from fp32's by bf16 rounding only.
TEST(ZeroTransients, ReducingInTheComputeDtypeHoldsLessAndStaysClose) {
  for (int stage : {2, 3}) {
    config::Config c = small_config(stage, 2);
    c.train.precision = config::Precision::kBf16;
    c.zero.bucket_mb = 1;  // every unit in flight at once: the reduction's bytes dominate
    const Measured fp32 = measure(c, 1);
    c.zero.reduce_dtype = config::ReduceDtype::kCompute;
    const Measured bf16 = measure(c, 1);
    EXPECT_LT(bf16.transients, fp32.transients) << "stage " << stage;
    EXPECT_NEAR(bf16.grad_norm / fp32.grad_norm, 1.0, 1e-2) << "stage " << stage;
    EXPECT_NE(bf16.grad_norm, fp32.grad_norm) << "stage " << stage << ": the reduction did not run in bf16";
  }
}

}  // namespace
}  // namespace zt::plan
