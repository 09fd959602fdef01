// The memory plan under parallel.pp (plan/memory_plan.hpp): each pipeline rank's predicted activations
// equal, to the byte, what its PipelineStage allocates (its chunks' activation sets in flight x each
// chunk's layout), for 1F1B and the interleaved schedule, GPT-2 and Llama, with recomputation; the plan
// is the busiest rank's, and --plan names it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/grid.hpp"
#include "plan/memory_plan.hpp"
#include "train/pipeline_stage.hpp"

namespace zt::train {
namespace {

config::Config tiny(config::Arch arch, int pp, int vpp, int micro_batches) {
  config::Config c;
  c.model.arch = arch;
  c.model.n_layer = 6;
  c.model.n_head = 4;
  c.model.n_embd = 32;
  c.model.vocab_size = 300;
  c.model.seq_len = 16;
  if (arch == config::Arch::kLlama) c.model.n_kv_head = 2, c.model.ffn_hidden = 48;
  c.parallel.pp = pp;
  c.parallel.vpp = vpp;
  c.parallel.schedule = vpp > 1 ? config::PipeSchedule::kInterleaved : config::PipeSchedule::kOneFOneB;
  c.train.micro_batch = 2;
  c.train.global_batch = 2 * micro_batches;  // one data-parallel rank: grad_accum = micro_batches
  return c;
}

TEST(PipelineMemory, PlannedActivationsEqualEachStagesAllocation) {
  auto backend = backend::make_cpu_backend(1);
  for (config::Arch arch : {config::Arch::kGpt2, config::Arch::kLlama})
    for (const auto& [pp, vpp, m] : {std::tuple{2, 1, 4}, {2, 2, 4}, {3, 1, 2}, {3, 2, 6}})
      for (config::Recompute r : {config::Recompute::kNone, config::Recompute::kFull}) {
        config::Config c = tiny(arch, pp, vpp, m);
        c.train.recompute = r;
        const std::string what = ::testing::PrintToString(std::tuple{static_cast<int>(arch), pp, vpp, m, static_cast<int>(r)});
        const model::ParamTable global(model::model_shape(c.model));
        const plan::MemoryPlan plan = plan::plan_memory(c, pp, 1, 0);
        ASSERT_EQ(plan.stage_activation_bytes.size(), static_cast<std::size_t>(pp)) << what;
        for (int rank = 0; rank < pp; ++rank) {
          const PipelineStage stage(*backend, global, dist::Grid::make(pp, 1, rank, pp), vpp, m,
                                    {.micro_batch = 2, .recompute = r});
          EXPECT_EQ(plan.stage_activation_bytes[static_cast<std::size_t>(rank)], stage.activation_bytes())
              << what << " rank " << rank;
        }
        // The rows are the busiest rank's; its total is the largest.
        const auto most = std::max_element(plan.stage_total_bytes.begin(), plan.stage_total_bytes.end());
        EXPECT_EQ(plan.busiest_stage, most - plan.stage_total_bytes.begin()) << what;
        EXPECT_EQ(plan.total_bytes, *most) << what;
      }
}

TEST(PipelineMemory, GivenBlockCountsArePlannedAsAllocated) {  // parallel.pp_layers
  auto backend = backend::make_cpu_backend(1);
  config::Config c = tiny(config::Arch::kGpt2, 2, 1, 4);
  c.parallel.pp_layers = "5,1";
  const model::ParamTable global(model::model_shape(c.model));
  const plan::MemoryPlan plan = plan::plan_memory(c, 2, 1, 0);
  for (int rank = 0; rank < 2; ++rank) {
    const PipelineStage stage(*backend, global, dist::Grid::make(2, 1, rank, 2), 1, 4, {.micro_batch = 2}, {5, 1});
    EXPECT_EQ(plan.stage_activation_bytes[static_cast<std::size_t>(rank)], stage.activation_bytes()) << rank;
  }
  EXPECT_EQ(plan.busiest_stage, 0);  // 2 micro-batches of 5 blocks in flight
  EXPECT_EQ(plan.busiest_note, "embedding + blocks 0-4");
}

TEST(PipelineMemory, TheBusiestStageHoldsItsOwnParametersAndIsNamed) {
  // 1F1B at pp=2 over 4 micro-batches: stage 0 keeps 2 activation sets, stage 1 one (with the logits).
  const config::Config c = tiny(config::Arch::kGpt2, 2, 1, 4);
  const plan::MemoryPlan p = plan::plan_memory(c, 2, 1, 0);
  const model::ParamTable global(model::model_shape(c.model));
  const model::PipelineCut cut = model::PipelineCut::make(global.shape(), 2);
  const model::ParamTable mine = cut.table(global, p.busiest_stage);
  EXPECT_EQ(p.rows[0].what, "parameters");
  EXPECT_EQ(p.rows[0].bytes, mine.numel() * sizeof(float));  // fp32, ZeRO 0: the stage's table only
  EXPECT_LT(p.rows[0].bytes, global.numel() * sizeof(float));
  const std::vector<plan::StageActivations> first = plan::pipeline_activations(c, 2, 0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].in_flight, 2);
  EXPECT_EQ(plan::pipeline_activations(c, 2, 1)[0].in_flight, 1);
  const std::string text = plan::format_plan(p, {});
  EXPECT_NE(text.find("2 rank(s) = parallel.pp 2 x 1 data-parallel"), std::string::npos) << text;
  EXPECT_NE(text.find(cat("pipeline: stage ", p.busiest_stage, " is the busiest")), std::string::npos) << text;
  // Two data-parallel ranks halve the micro-batches; the plan still counts what 1F1B keeps in flight.
  EXPECT_EQ(plan::pipeline_micro_batches(c, 4), 2);
  EXPECT_EQ(plan::pipeline_micro_batches(tiny(config::Arch::kGpt2, 3, 2, 4), 3), 6);  // whole groups of pp
}

}  // namespace
}  // namespace zt::train
