// The layout planner: the enumerator's factors, what it ranks (fits, runs today), the rejected layout's
// reason, the pipeline bubble and memory per stage, and the step-time terms against their formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <string>

#include "config/config.hpp"
#include "model/nf4_params.hpp"
#include "model/param_table.hpp"
#include "model/pipeline_schedule.hpp"
#include "model/stage_split.hpp"
#include "plan/memory_plan.hpp"
#include "plan/layout_search.hpp"

namespace zt::plan {
namespace {

// Llama 3.1 8B (inputs/configs/llama3.1-8b.ini's shape) in bf16, global batch 64.
config::Config llama_8b() {
  config::Config c;
  c.model.arch = config::Arch::kLlama;
  c.model.n_layer = 32;
  c.model.n_head = 32;
  c.model.n_kv_head = 8;
  c.model.n_embd = 4096;
  c.model.ffn_hidden = 14336;
  c.model.vocab_size = 128256;
  c.model.seq_len = 8192;
  c.model.tie_embeddings = config::TieEmbeddings::kFalse;
  c.train.precision = config::Precision::kBf16;
  c.train.global_batch = 64;
  c.train.micro_batch = 1;
  return c;
}

// A small GPT-2 in fp32 (tensor parallelism runs there today).
config::Config gpt2_small() {
  config::Config c;
  c.model.n_layer = 8;
  c.model.n_head = 8;
  c.model.n_embd = 256;
  c.model.vocab_size = 4096;
  c.model.seq_len = 256;
  c.train.global_batch = 32;
  return c;
}

Machine gpus(std::int64_t world, std::int64_t per_node, double gib) {
  config::PlanConfig p;
  p.gpus_per_node = per_node;
  return machine_of(p, world, static_cast<std::uint64_t>(gib * (1ull << 30)), config::Device::kCuda, 1);
}

TEST(LayoutSearch, EveryLayoutFillsTheWorldWithTpInsideANodeAndTheBatchSplit) {
  const config::Config c = llama_8b();
  const Machine m = gpus(32, 4, 80);
  const std::vector<Layout> all = enumerate_layouts(c, m);
  ASSERT_FALSE(all.empty());
  bool saw_pp = false, saw_tp = false, saw_interleaved = false;
  for (const Layout& l : all) {
    EXPECT_EQ(std::int64_t{l.tp} * l.pp * l.dp, 32) << layout_flags(l);
    EXPECT_EQ(4 % l.tp, 0) << "TP leaves the node: " << layout_flags(l);
    EXPECT_EQ(8 % l.tp, 0) << "TP splits a K/V head: " << layout_flags(l);
    EXPECT_EQ(32 % l.pp, 0) << layout_flags(l);
    EXPECT_EQ(std::int64_t{l.micro_batch} * l.grad_accum * l.dp, c.train.global_batch) << layout_flags(l);
    if (l.vpp > 1) {
      EXPECT_EQ(l.grad_accum % l.pp, 0) << layout_flags(l);
    }
    saw_pp |= l.pp > 1;
    saw_tp |= l.tp > 1;
    saw_interleaved |= l.vpp > 1;
  }
  EXPECT_EQ(saw_pp, pipeline_available(2));
  EXPECT_TRUE(saw_tp);
  EXPECT_EQ(saw_interleaved, pipeline_available(2));
}

// RL trains with rl.mini_batch prompts x rl.group_size responses an optimizer step, not train.global_batch:
// the search ranks those steps, deals each step's prompts whole to the data-parallel ranks, and names the
// pipeline (which RL does not run) as the reason its layouts are out.
TEST(LayoutSearch, AnRlRunIsSearchedAtItsOptimizerStepsBatch) {
  config::Config rl = gpt2_small();
  rl.rl.prompts = "prompts.jsonl";
  rl.rl.batch = 64, rl.rl.mini_batch = 32, rl.rl.group_size = 5;
  rl.train.micro_batch = 8;
  const config::Config c = search_config(rl);
  EXPECT_EQ(c.train.global_batch, 160);
  EXPECT_EQ(configured_layout(c, 2).grad_accum, 10);
  const Machine m = gpus(4, 4, 80);
  bool saw_pp = false;
  for (const Layout& l : enumerate_layouts(c, m)) {
    EXPECT_EQ(32 % l.dp, 0) << "a step's 32 prompts split whole: " << layout_flags(l);
    EXPECT_EQ(std::int64_t{l.micro_batch} * l.grad_accum * l.dp, 160) << layout_flags(l);
    if (l.pp == 1) continue;
    saw_pp = true;
    EXPECT_NE(evaluate(c, l, m).rejected.find("RL does not run under a pipeline"), std::string::npos);
  }
  EXPECT_EQ(saw_pp, pipeline_available(2));
  const std::string table = format_search(c, m, search_layouts(c, m), evaluate(c, configured_layout(c, 4), m));
  EXPECT_NE(table.find("RL update: rl.mini_batch 32 x rl.group_size 5 = 160"), std::string::npos) << table;
  // 3 data-parallel ranks cannot take 32 prompts whole: the configured layout says so.
  EXPECT_NE(evaluate(c, configured_layout(c, 3), gpus(3, 4, 80)).rejected.find("rl.mini_batch=32 prompts do not deal evenly"),
            std::string::npos);
}

TEST(LayoutSearch, RanksOnlyWhatFitsAndRunsAndNamesWhyTheBestRejectedDoesNot) {
  const config::Config c = llama_8b();
  const Machine m = gpus(32, 4, 80);
  const SearchResult r = search_layouts(c, m);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_EQ(r.tried, static_cast<std::int64_t>(r.ranked.size()) + r.out_of_memory + r.unsupported);
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const Candidate& k = r.ranked[i];
    EXPECT_LE(k.memory_bytes, m.capacity_bytes) << layout_flags(k.layout);
    EXPECT_EQ(std::int64_t{k.layout.tp} * k.layout.pp * k.layout.dp, 32);
    if (i > 0) {
      EXPECT_GE(k.time.total(), r.ranked[i - 1].time.total() * (1 - 1e-9));
    }
  }
  // Llama 8B at T=8192 without recompute on 4 pipeline stages overflows 80 GiB (its activations).
  ASSERT_TRUE(r.best_rejected.has_value());
  const Candidate& bad = *r.best_rejected;
  EXPECT_TRUE(bad.out_of_memory);
  EXPECT_GT(bad.memory_bytes, m.capacity_bytes);
  char want[64];
  std::snprintf(want, sizeof want, "needs %.1f GiB of 80.0 GiB", static_cast<double>(bad.memory_bytes) / (1ull << 30));
  EXPECT_EQ(bad.rejected, want);
  for (const Candidate& k : r.ranked) EXPECT_TRUE(k.rejected.empty());
  // Full recomputation keeps less than none on the same layout.
  Layout l = r.ranked.front().layout;
  l.recompute = config::Recompute::kNone;
  const std::uint64_t none = layout_memory(c, l, m);
  l.recompute = config::Recompute::kFull;
  EXPECT_LT(layout_memory(c, l, m), none);
}

// Llama 8B on one 80 GiB device: only with its optimizer state offloaded (ZeRO-Offload's case; the
// parameters too at ZeRO-3, ranked after: their reads cost more), and not where the node's host memory
// cannot hold that state either (then NVMe).
TEST(LayoutSearch, OneDeviceFitsLlama8BOnlyWithTheOptimizerOffloaded) {
  config::Config c = llama_8b();
  const SearchResult r = search_layouts(c, gpus(1, 4, 80));
  ASSERT_FALSE(r.ranked.empty());
  for (const Candidate& k : r.ranked) EXPECT_NE(k.layout.offload, config::Offload::kNone) << layout_flags(k.layout);
  EXPECT_EQ(r.ranked.front().layout.offload, config::Offload::kOptimizer) << layout_flags(r.ranked.front().layout);
  ASSERT_TRUE(r.best_rejected.has_value());
  EXPECT_NE(r.best_rejected->rejected.find("needs "), std::string::npos);
  c.plan.host_memory_gb = 64;  // 8B x 16 bytes of state does not fit 64 GiB of host memory
  const SearchResult nvme = search_layouts(c, gpus(1, 4, 80));
  ASSERT_FALSE(nvme.ranked.empty());
  for (const Candidate& k : nvme.ranked) EXPECT_EQ(k.layout.offload_to, config::OffloadTo::kNvme) << layout_flags(k.layout);
}

// Parameter offload (train.offload=params) is ranked at ZeRO-3 only: less device memory than the optimizer
// tier on the same layout, and its cost adds each micro-batch's two reads of every unit's slice over PCIe
// (the update's slice no longer goes up); flags name it.
TEST(LayoutSearch, ParameterOffloadIsRankedAtZero3AndCostsItsReads) {
  const config::Config c = llama_8b();
  const Machine m = gpus(4, 4, 40);
  const SearchResult r = search_layouts(c, m);
  for (const Candidate& k : r.ranked) {
    if (k.layout.offload == config::Offload::kParams) {
      EXPECT_EQ(k.layout.zero_stage, 3) << layout_flags(k.layout);
    }
  }
  const auto params = std::find_if(r.ranked.begin(), r.ranked.end(), [](const Candidate& k) {
    return k.layout.offload == config::Offload::kParams && k.layout.offload_to == config::OffloadTo::kHost &&
           k.layout.tp == 1 && k.layout.pp == 1;
  });
  ASSERT_NE(params, r.ranked.end()) << "no parameter-offload layout fits 4 x 40 GiB for Llama 8B";
  EXPECT_NE(layout_flags(params->layout).find(" --train.zero_stage=3 --train.offload=params"), std::string::npos)
      << layout_flags(params->layout);
  Layout optimizer = params->layout;
  optimizer.offload = config::Offload::kOptimizer;
  EXPECT_LT(params->memory_bytes, layout_memory(c, optimizer, m));
  const double shard = static_cast<double>(model::ParamTable(model::model_shape(c.model)).numel()) / params->layout.dp;
  const double reads = shard * 2 * 2 * params->layout.grad_accum;  // bf16, forward and backward
  EXPECT_NEAR(params->time.offload, shard * 6 / 25e9 + shard * 30 / (200e9 / 4) + (reads - shard * 2) / 25e9,
              1e-9 * params->time.offload);
}

TEST(LayoutSearch, PredictedBubbleIsThatFractionOfThePipelinesTime) {
  const config::Config c = gpt2_small();
  Machine m = gpus(8, 8, 80);
  for (int vpp : {1, 2}) {
    const Layout l{1, 4, vpp, 2, 2, 8, config::Recompute::kNone, 1};
    const StepTime t = predict_step(c, l, m);
    const double pipeline = t.compute + t.tp_comm + t.pp_comm + t.bubble;
    EXPECT_NEAR(t.bubble / pipeline, model::bubble_fraction(4, 8, vpp), 1e-12) << "vpp " << vpp;
    EXPECT_GT(t.pp_comm, 0);
    EXPECT_EQ(t.tp_comm, 0);
  }
}

TEST(LayoutSearch, StepTermsFollowTheirFormulas) {
  const config::Config c = gpt2_small();
  Machine m = gpus(8, 4, 80);
  m.latency_s = 0;
  m.overlap = false;  // the bytes alone (the CPU backend's model)
  // Compute splits evenly over the world; full recompute adds a forward (less than the x4/3 of 6N+attn
  // for the head, which is not recomputed).
  const StepTime dp8 = predict_step(c, {1, 1, 1, 8, 1, 4, config::Recompute::kNone, 0}, m);
  const StepTime dp4 = predict_step(c, {1, 1, 1, 4, 1, 8, config::Recompute::kNone, 0}, m);
  EXPECT_NEAR(dp4.compute / dp8.compute, 2.0, 1e-12);
  const StepTime full = predict_step(c, {1, 1, 1, 8, 1, 4, config::Recompute::kFull, 0}, m);
  EXPECT_GT(full.compute / dp8.compute, 1.2);
  EXPECT_LT(full.compute / dp8.compute, 4.0 / 3.0 + 1e-12);
  // A pipeline splits the blocks but not the LM head: its last stage is slower than 1/pp of the model.
  const StepTime pp2 = predict_step(c, {1, 2, 1, 4, 1, 8, config::Recompute::kNone, 0}, m);
  EXPECT_GT(pp2.compute, dp8.compute);
  EXPECT_LT(pp2.compute, 2 * dp8.compute);
  // ZeRO traffic (tools/bench/zero/report.py): stage 3 moves 3a Psi in RS/AG against stage 0's all-reduce
  // (2 Psi through the ring): the ratio is 3a/2; stage 2 (a+1)/2.
  const int a = 4;
  const auto dp = [&](int stage) { return predict_step(c, {1, 1, 1, 8, 1, a, config::Recompute::kNone, stage}, m).dp_comm; };
  EXPECT_NEAR(dp(3) / dp(0), 3.0 * a / 2, 1e-9);
  EXPECT_NEAR(dp(2) / dp(0), (a + 1) / 2.0, 1e-9);
  EXPECT_NEAR(dp(1) / dp(0), 1.0, 1e-9);
  // DP inside a node (tp*dp <= gpus_per_node) rides the faster link.
  Machine one_node = gpus(8, 8, 80);
  one_node.latency_s = 0;
  one_node.overlap = false;
  EXPECT_NEAR(predict_step(c, {1, 1, 1, 8, 1, 4, config::Recompute::kNone, 0}, m).dp_comm /
                  predict_step(c, {1, 1, 1, 8, 1, 4, config::Recompute::kNone, 0}, one_node).dp_comm,
              m.intra_gbps / m.inter_gbps, 1e-9);
  // TP talks, one rank per TP group computes 1/tp; no DP, no talk.
  const StepTime tp2 = predict_step(c, {2, 1, 1, 4, 1, 8, config::Recompute::kNone, 0}, m);
  EXPECT_GT(tp2.tp_comm, 0);
  EXPECT_EQ(predict_step(c, {4, 1, 1, 1, 1, 32, config::Recompute::kNone, 0}, gpus(4, 4, 80)).dp_comm, 0);
}

TEST(LayoutSearch, OverlapHidesTrafficBehindComputeButNotTheAllGatherAfterTheOptimizer) {
  const config::Config c = gpt2_small();
  Machine m = gpus(8, 4, 80), serial = m;
  m.latency_s = serial.latency_s = 0;
  serial.overlap = false;
  for (int stage = 0; stage <= 3; ++stage) {
    const Layout l{1, 1, 1, 8, 1, 4, config::Recompute::kNone, stage};
    const double hidden = predict_step(c, l, m).dp_comm, bytes = predict_step(c, l, serial).dp_comm;
    EXPECT_LE(hidden, bytes) << "stage " << stage;
    if (stage == 1) {
      EXPECT_GE(hidden, bytes / 2 * (1 - 1e-12));  // the all-gather half stays
    }
  }
  // Slow links: the traffic outgrows the compute and shows again.
  Machine slow = m;
  slow.inter_gbps = 0.001;
  EXPECT_GT(predict_step(c, {1, 1, 1, 8, 1, 4, config::Recompute::kNone, 0}, slow).dp_comm, 0);
}

TEST(LayoutSearch, StageZeroHoldsAtMostPpMicroBatchesOfActivations) {
  const config::Config c = gpt2_small();
  const Machine m = gpus(8, 8, 80);
  const auto mem = [&](int pp, int accum) {
    return layout_memory(c, {1, pp, 1, 8 / pp, 1, accum, config::Recompute::kNone, 1}, m);
  };
  EXPECT_LT(mem(4, 1), mem(4, 2));   // 1 in flight, then 2
  EXPECT_LT(mem(4, 2), mem(4, 4));   // ... 4 = pp
  EXPECT_EQ(mem(4, 4), mem(4, 16));  // capped at pp under 1F1B
  EXPECT_LT(mem(2, 8), mem(1, 8));   // half the layers' state per stage
  // The layout's memory is the memory plan's for that layout (its busiest pipeline rank).
  config::Config pp4 = c;
  pp4.parallel.pp = 4;
  pp4.train.zero_stage = 1;
  pp4.train.micro_batch = 1;
  pp4.train.global_batch = 8;  // 4 micro-batches on each of 2 data-parallel ranks
  EXPECT_EQ(mem(4, 4), plan_memory(pp4, 8, 1, 0, config::Device::kCuda).total_bytes);
}

// The stage cost is the trainer's cut's: the busiest rank of the cost-balanced split, not L/pp blocks.
TEST(LayoutSearch, ComputeIsTheBusiestRanksOfTheTrainersCut) {
  const config::Config c = gpt2_small();
  Machine m = gpus(8, 8, 80);
  const model::GptShape shape = model::model_shape(c.model);
  const double tokens = static_cast<double>(c.train.global_batch) * shape.seq_len, speed = m.tflops * 1e12 * m.efficiency;
  for (const auto& [pp, vpp] : {std::pair{1, 1}, {2, 1}, {4, 1}, {2, 2}}) {
    const Layout l{1, pp, vpp, 8 / pp, 1, 32 / (8 / pp), config::Recompute::kNone, 1};
    const model::PipelineCut cut = model::PipelineCut::make(shape, pp, vpp);
    double busiest = 0;
    for (int r = 0; r < pp; ++r) busiest = std::max(busiest, cut.rank_flops(shape, r));
    EXPECT_NEAR(predict_step(c, l, m).compute, tokens * busiest / l.dp / speed, 1e-15) << pp << " x " << vpp;
  }
}

// Every layout key is given, so that appended to a configured command line (a pipeline, an interleaved
// schedule, offload, sequence parallelism) the flags run this layout and no other.
TEST(LayoutSearch, FlagsNameEveryAxis) {
  EXPECT_EQ(layout_flags({1, 4, 1, 4, 1, 8, config::Recompute::kSelective, 1}),
            "--parallel.tp=1 --parallel.pp=4 --parallel.schedule=1f1b --parallel.vpp=1 --parallel.sequence_parallel=false "
            "--train.micro_batch=1 --train.recompute=selective --train.zero_stage=1 --train.offload=none");
  Layout sp{4, 1, 1, 8, 2, 4, config::Recompute::kNone, 3, config::Offload::kOptimizer};
  sp.sequence_parallel = true;
  EXPECT_EQ(layout_flags(sp),
            "--parallel.tp=4 --parallel.pp=1 --parallel.schedule=1f1b --parallel.vpp=1 --parallel.sequence_parallel=true "
            "--train.micro_batch=2 --train.recompute=none --train.zero_stage=3 --train.offload=optimizer --offload.to=host");
  EXPECT_EQ(layout_flags({1, 2, 2, 4, 1, 8, config::Recompute::kFull, 0}),
            "--parallel.tp=1 --parallel.pp=2 --parallel.schedule=interleaved --parallel.vpp=2 "
            "--parallel.sequence_parallel=false --train.micro_batch=1 --train.recompute=full --train.zero_stage=0 "
            "--train.offload=none");
}

// The search tries sequence parallelism where tp > 1 (it cuts TP's activations by tp), and never on tp = 1
// even when the configuration sets it (the run refuses that).
TEST(LayoutSearch, SequenceParallelismIsAnAxisOfTpLayouts) {
  config::Config c = llama_8b();
  c.parallel.sequence_parallel = true;
  c.parallel.tp = 2;
  Machine m;
  m.world = 8, m.gpus_per_node = 4;
  bool tried = false;
  for (const Layout& l : enumerate_layouts(c, m)) {
    EXPECT_FALSE(l.sequence_parallel && l.tp == 1) << layout_flags(l);
    tried = tried || (l.sequence_parallel && l.tp > 1);
  }
  EXPECT_TRUE(tried);
}

// Optimizer offload is one more axis at ZeRO >= 1: the host tier (the state over PCIe to host memory and
// the host AdamW) and NVMe (the state's file read and written every step); both leave the device with
// less, cost time by their formulas, appear in the flags, and plan.host_memory_gb rejects the host tier
// where a node's memory cannot hold its ranks' state, leaving NVMe.
TEST(LayoutSearch, OffloadTiersAreRankedWhereTheyFitAndCostTheirTransfers) {
  config::Config c = llama_8b();
  const Machine m = gpus(4, 4, 40);
  const SearchResult r = search_layouts(c, m);
  ASSERT_FALSE(r.ranked.empty());
  const auto host = std::find_if(r.ranked.begin(), r.ranked.end(), [](const Candidate& k) {
    return k.layout.offload == config::Offload::kOptimizer && k.layout.offload_to == config::OffloadTo::kHost;
  });
  ASSERT_NE(host, r.ranked.end()) << "no host-offload layout fits 4 x 40 GiB for Llama 8B";
  EXPECT_NE(layout_flags(host->layout).find(" --train.offload=optimizer"), std::string::npos);
  Layout none = host->layout, nvme = host->layout;
  none.offload = config::Offload::kNone;
  nvme.offload_to = config::OffloadTo::kNvme;
  EXPECT_LT(host->memory_bytes, layout_memory(c, none, m));
  EXPECT_TRUE(layout_flags(nvme).ends_with(" --train.offload=optimizer --offload.to=nvme --offload.nvme_dir=DIR"))
      << layout_flags(nvme);
  // The host tier: the rank's shard (its TP part over DP) down in fp32 and back in bf16 over PCIe, and
  // 28 + 2 bytes a parameter through the node's host memory, shared by its 4 ranks.
  if (host->layout.tp == 1 && host->layout.pp == 1) {
    const double shard = static_cast<double>(model::ParamTable(model::model_shape(c.model)).numel()) / host->layout.dp;
    EXPECT_NEAR(host->time.offload, shard * 6 / 25e9 + shard * 30 / (200e9 / 4), 1e-9 * host->time.offload);
  }
  EXPECT_GT(predict_step(c, nvme, m).offload, host->time.offload);  // 24 bytes a parameter at 6 GB/s a node
  EXPECT_EQ(predict_step(c, none, m).offload, 0.0);

  c.plan.host_memory_gb = 16;  // 4 GiB a rank: the host tier's state does not fit there
  const Candidate cramped = evaluate(c, host->layout, m);
  EXPECT_TRUE(cramped.out_of_memory);
  EXPECT_NE(cramped.rejected.find("its offloaded state needs "), std::string::npos) << cramped.rejected;
  EXPECT_NE(cramped.rejected.find("GiB of host memory per rank, of 4.0"), std::string::npos) << cramped.rejected;
  // NVMe's state leaves the host; what is left of its host memory is rank 0's checkpoint save (the whole
  // fp32 model gathered for model.h5 under TP or PP), which 4 GiB cannot hold either.
  const Candidate on_disk = evaluate(c, nvme, m);
  EXPECT_LT(on_disk.host_bytes, std::uint64_t{1} << 30);
  if (!on_disk.rejected.empty()) {
    EXPECT_NE(on_disk.rejected.find("a checkpoint save needs "), std::string::npos) << on_disk.rejected;
  }
}

// Pipeline layouts are ranked only as ztrain runs them (train/pipeline_stage.cpp's and config::derive's
// refusals): 1F1B or interleaved (micro-batches in whole groups of pp, a block per virtual stage), with
// or without TP, at ZeRO 0-1, on the CPU backend's MPI path; each other kind is named with its reason.
TEST(LayoutSearch, PipelineLayoutsAreRankedOnlyAsZtrainRunsThem) {
  const config::Config c = gpt2_small();
  Machine cpu = gpus(8, 8, 80);
  cpu.device = config::Device::kCpu;
  auto why = [&](const Layout& l, const Machine& m) { return evaluate(c, l, m).rejected; };
  const Layout runs{1, 2, 1, 4, 1, 8, config::Recompute::kNone, 1};
  EXPECT_EQ(why(runs, cpu), "");
  Layout interleaved = runs, with_tp = runs, zero2 = runs;
  interleaved.vpp = 2;
  with_tp.tp = 2, with_tp.dp = 2;
  zero2.zero_stage = 2;
  EXPECT_EQ(why(interleaved, cpu), "");
  Layout odd_groups = interleaved, too_many = interleaved;
  odd_groups.grad_accum = 3;  // not whole groups of pp = 2
  EXPECT_NE(why(odd_groups, cpu).find("groups of parallel.pp"), std::string::npos);
  too_many.pp = 2, too_many.vpp = 5;  // 10 virtual stages, 8 blocks
  EXPECT_NE(why(too_many, cpu).find("pp x vpp > n_layer"), std::string::npos);
  // The search ranks interleaved layouts beside 1F1B ones on the CPU ranks' path.
  const SearchResult r = search_layouts(c, cpu);
  EXPECT_TRUE(std::any_of(r.ranked.begin(), r.ranked.end(), [](const Candidate& k) { return k.layout.vpp == 2; }));
  EXPECT_TRUE(std::any_of(r.ranked.begin(), r.ranked.end(), [](const Candidate& k) { return k.layout.pp > 1 && k.layout.vpp == 1; }));
  EXPECT_EQ(why(with_tp, cpu), "");  // pp x tp runs (tests/mpi/pipeline_tp_training.sh)
  EXPECT_NE(why(zero2, cpu).find("ZeRO 0-1"), std::string::npos);
  EXPECT_NE(why(runs, gpus(8, 8, 80)).find("NCCL"), std::string::npos);
}

// LoRA (lora.rank > 0): the frozen base computes no weight gradient, so each block's matmuls cost 4 x its
// parameters a token instead of 6 and the head 4 C Vp, plus 6 x the adapters'; the data-parallel traffic
// is the adapters' alone below ZeRO 3, where the frozen base's gathers join it; the search ranks LoRA
// layouts (Llama 70B's shape on 16 GPUs of 80 GB).
TEST(LayoutSearch, LoraComputesNoBaseWeightGradientAndReducesOnlyTheAdapters) {
  config::Config c = llama_8b(), lora = c;
  lora.lora.rank = 16;
  lora.lora.targets = "q,k,v,o,gate,up,down";
  Machine m = gpus(16, 8, 80);
  m.latency_s = 0;
  m.overlap = false;
  const Layout l{1, 1, 1, 16, 1, 4, config::Recompute::kNone, 0};
  const model::GptShape shape = model::model_shape(c.model);
  const model::ParamTable table(shape);
  const double C = shape.n_embd, T = shape.seq_len, L = shape.n_layer, Vp = shape.padded_vocab;
  const double block = static_cast<double>(table.units()[1].numel);
  const double adapters = static_cast<double>(model::lora_table(shape, model::lora_spec(lora)).numel());
  const double full = L * (6 * block + 12 * C * T) + 6 * C * Vp;
  const double tuned = L * (4 * block + 12 * C * T) + 4 * C * Vp + 6 * adapters;
  const StepTime f = predict_step(c, l, m), t = predict_step(lora, l, m);
  EXPECT_NEAR(t.compute / f.compute, (tuned + 3 * C) / (full + 3 * C), 1e-9);  // + the embedding's 3 C
  EXPECT_NEAR(t.dp_comm / f.dp_comm, adapters / static_cast<double>(table.numel()), 1e-9);
  // ZeRO 3: the adapters' a reduce-scatters and 2a gathers (bf16: half a pass each), plus the frozen
  // base's 2a gathers in bf16 (a = 4 micro-batches).
  Layout z3 = l;
  z3.zero_stage = 3;
  const double base = static_cast<double>(table.numel()), a = 4;
  EXPECT_NEAR(predict_step(lora, z3, m).dp_comm / f.dp_comm, (2 * a * adapters + 2 * a * base / 2) / (2 * base), 1e-9);

  config::Config big = lora;  // Llama 3 70B's shape, bf16, context 8192
  big.model.n_layer = 80, big.model.n_embd = 8192, big.model.n_head = 64, big.model.ffn_hidden = 28672;
  big.parallel.sequence_parallel = true;
  const SearchResult r = search_layouts(big, gpus(16, 8, 80));
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_LE(r.ranked.front().memory_bytes, 80ull << 30);
  EXPECT_GT(r.ranked.front().tokens_per_s, 0);
}

// lora.base_dtype=nf4: the frozen base row is what model::Nf4Params holds (codes + scales of the blocks'
// matmul weights, the rest in bf16), a few times smaller than the bf16 base, plus the block it dequantizes;
// double quantization makes it smaller still.
TEST(MemoryPlan, AnNf4BaseIsItsCodesAndScalesAndOneDequantizedBlock) {
  config::Config c = llama_8b();
  c.lora.rank = 16;
  auto rows = [](const config::Config& cfg) {
    std::map<std::string, std::uint64_t> r;
    for (const PlanRow& row : plan_memory(cfg, 8, 1, 0, config::Device::kCuda).rows) r[row.what] = row.bytes;
    return r;
  };
  const std::uint64_t bf16 = rows(c).at("frozen base");
  c.lora.base_dtype = config::LoraBaseDtype::kNf4;
  const model::ParamTable table(model::model_shape(c.model));
  const auto nf4 = rows(c);
  EXPECT_EQ(nf4.at("frozen base"), model::nf4_held_bytes(table, DType::kBF16, {}));
  EXPECT_EQ(nf4.at("dequantized base unit"), model::nf4_unit_scratch_bytes(table, DType::kBF16, {}));
  EXPECT_GT(static_cast<double>(bf16) / static_cast<double>(nf4.at("frozen base")), 2.5);  // 8B: ~1.3 GB of bf16 embeddings stay
  c.lora.base_double_quant = true;
  EXPECT_EQ(rows(c).at("frozen base"), model::nf4_held_bytes(table, DType::kBF16, {.double_quant = true}));
  EXPECT_LT(rows(c).at("frozen base"), nf4.at("frozen base"));
  // --plan.search ranks its layouts, ZeRO-3 (the codes sharded over the ranks) among them.
  const SearchResult r = search_layouts(c, gpus(8, 8, 80));
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_TRUE(std::any_of(r.ranked.begin(), r.ranked.end(), [](const Candidate& k) { return k.layout.zero_stage == 3; }));
}

}  // namespace
}  // namespace zt::plan
