// The layout search and the plan's refusal agreeing with each other and with the run (outside sweep 38):
// the search's flags run their layout on any configured command line (F5), its TP cost is the layout's
// own sequence parallelism (F4), its rejections print the figure the fit test compares (F6), LoRA's
// parameter offload is searched (F7), and a refusal's fixes try tensor and pipeline parallelism (F8).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "config/derived.hpp"
#include "config/parse.hpp"
#include "model/from_config.hpp"
#include "plan/layout_search.hpp"
#include "plan/memory_plan.hpp"

namespace zt::plan {
namespace {

// The sweep's untied Llama (L=4, C=256, 8 heads, 2 K/V heads, V=32000) as command-line keys.
std::vector<std::string> llama_args() {
  return {"--train.device=cpu",     "--model.arch=llama",     "--model.n_layer=4",         "--model.n_head=8",
          "--model.n_kv_head=2",    "--model.n_embd=256",     "--model.vocab_size=32000",  "--model.seq_len=256",
          "--train.global_batch=16", "--train.micro_batch=8"};
}

config::Config parsed(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"ztrain"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return config::parse_command_line(static_cast<int>(argv.size()), argv.data()).config;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

Machine cpu_ranks(std::int64_t world, double gib) {
  return machine_of(config::PlanConfig{}, world, static_cast<std::uint64_t>(gib * (1ull << 30)), config::Device::kCpu, 1);
}

// F5: every layout the search would rank, its flags appended to a configured command line that sets a
// pipeline cut, the NVMe tier's keys or ZeRO-2's reduce dtype, parses, passes the batch rules and is
// that layout (configured_layout of the result).
TEST(SearchFlags, AppendedToAnyConfiguredCommandLineTheyRunTheirLayout) {
  const std::vector<std::vector<std::string>> configured = {
      {"--parallel.pp=2", "--parallel.pp_layers=1,3"},
      {"--train.zero_stage=1", "--train.offload=optimizer", "--offload.to=nvme", "--offload.nvme_dir=/tmp",
       "--offload.nvme_chunk_mb=4"},
      {"--train.precision=bf16", "--train.zero_stage=2", "--zero.reduce_dtype=compute"},
  };
  const Machine m = cpu_ranks(2, 0);
  for (const std::vector<std::string>& keys : configured) {
    std::vector<std::string> base = llama_args();
    base.insert(base.end(), keys.begin(), keys.end());
    const config::Config c = parsed(base);
    int checked = 0;
    for (const Layout& l : enumerate_layouts(c, m)) {
      if (!evaluate(c, l, m).rejected.empty()) continue;
      std::vector<std::string> args = base;
      for (const std::string& w : words(layout_flags(l, c))) args.push_back(w == "--offload.nvme_dir=DIR" ? "--offload.nvme_dir=/tmp" : w);
      config::Config run;
      ASSERT_NO_THROW(run = parsed(args)) << layout_flags(l, c);
      ASSERT_NO_THROW(config::derive(run, 2)) << layout_flags(l, c);
      EXPECT_EQ(configured_layout(run, 2), l) << layout_flags(l, c);
      // The cut the search planned: the configured one for the configured pipeline, else by cost.
      EXPECT_EQ(run.parallel.pp_layers.empty(), !keeps_pp_layers(c, l) || c.parallel.pp_layers.empty()) << layout_flags(l, c);
      ++checked;
    }
    EXPECT_GT(checked, 10);
  }
  // On a configuration of defaults the flags clear nothing: none is set.
  const Layout plain{1, 2, 1, 1, 8, 1, config::Recompute::kNone, 0};
  EXPECT_EQ(layout_flags(plain, parsed(llama_args())), layout_flags(plain));
  EXPECT_EQ(layout_flags(plain).find("pp_layers"), std::string::npos);
}

// An empty value is a key's empty value, so "--parallel.pp_layers=" and "--offload.nvme_dir=" clear them.
TEST(SearchFlags, TheClearingFormsParse) {
  std::vector<std::string> args = llama_args();
  for (const char* k : {"--parallel.pp=2", "--parallel.pp_layers=1,3", "--parallel.pp_layers=", "--offload.nvme_dir=/tmp",
                        "--offload.nvme_chunk_mb=4", "--offload.nvme_dir=", "--offload.nvme_chunk_mb=64"})
    args.push_back(k);
  const config::Config c = parsed(args);
  EXPECT_TRUE(c.parallel.pp_layers.empty());
  EXPECT_TRUE(c.offload.nvme_dir.empty());
  EXPECT_EQ(c.offload.nvme_chunk_mb, config::OffloadConfig{}.nvme_chunk_mb);
}

// F4: a TP layout's traffic and messages are its own sequence parallelism's, whatever the configured run
// says: SP regathers the backward's inputs (more bytes) in 2.5x the collectives.
TEST(SearchCost, TensorParallelTrafficFollowsTheLayoutsSequenceParallelism) {
  config::Config c = parsed(llama_args());
  Machine m = cpu_ranks(2, 0);
  Layout plain{2, 1, 1, 1, 8, 2, config::Recompute::kNone, 0}, sp = plain;
  sp.sequence_parallel = true;
  const double without = predict_step(c, plain, m).tp_comm, with = predict_step(c, sp, m).tp_comm;
  EXPECT_GT(with, without);
  c.parallel.tp = 2, c.parallel.sequence_parallel = true;  // the configured run's flag changes neither
  EXPECT_EQ(predict_step(c, plain, m).tp_comm, without);
  EXPECT_EQ(predict_step(c, sp, m).tp_comm, with);
}

// F6: a rejection prints what the fit test compares (on CPU ranks the step's peak with what lies outside
// the allocator, or loading's), in MiB at a CPU rank's capacity, never "needs less of more".
TEST(SearchText, ARejectionPrintsTheComparedPeakInMiB) {
  config::Config c = parsed(llama_args());
  const Machine m = cpu_ranks(2, 0.4);
  const Layout l{1, 1, 1, 2, 1, 8, config::Recompute::kNone, 0};  // micro_batch 1 x 8
  c.train.micro_batch = 1;  // the plan of that layout
  const Candidate k = evaluate(c, l, m);
  ASSERT_TRUE(k.out_of_memory);
  const MemoryPlan p = plan_memory(c, 2, 1, m.capacity_bytes, config::Device::kCpu);
  EXPECT_EQ(k.peak_bytes, p.device_peak());
  EXPECT_GT(k.peak_bytes, m.capacity_bytes);
  EXPECT_LT(k.memory_bytes, m.capacity_bytes);  // the allocator's alone would fit: the sweep's "0.3 GiB of 0.4"
  EXPECT_EQ(k.rejected.find(cat("needs ", fixed(static_cast<double>(k.peak_bytes) / (1 << 20), 1), " MiB of 409.6 MiB (")), 0u)
      << k.rejected;
  EXPECT_EQ(needs_text(std::uint64_t{78} << 30, (std::uint64_t{78} << 30) - (8 << 20)), "78.00 GiB of 77.99 GiB");
  // The plan's total line says "fits" only where the fit test passes.
  const std::string text = format_plan(p, {});
  EXPECT_NE(text.find("available per rank: DOES NOT FIT with what the rank holds beside it (below)"), std::string::npos) << text;
}

// F7: with LoRA the search tries the frozen base's parameter offload at ZeRO-3, which fits Llama 3.1 8B on
// one 16 GB GPU at T=2048 with full recompute (the plan's own fix), and nothing else does.
TEST(SearchLora, TheFrozenBaseIsOffloadedAsParametersAtZero3) {
  config::Config c;
  c.model.arch = config::Arch::kLlama;
  c.model.n_layer = 32, c.model.n_head = 32, c.model.n_kv_head = 8, c.model.n_embd = 4096, c.model.ffn_hidden = 14336;
  c.model.vocab_size = 128256, c.model.seq_len = 2048, c.model.tie_embeddings = config::TieEmbeddings::kFalse;
  c.train.precision = config::Precision::kBf16;
  c.train.global_batch = 8, c.train.micro_batch = 1, c.train.recompute = config::Recompute::kFull;
  c.lora.rank = 16;
  config::PlanConfig pc;
  const Machine m = machine_of(pc, 1, 14ull << 30, config::Device::kCuda, 1);
  const SearchResult r = search_layouts(c, m);
  ASSERT_FALSE(r.ranked.empty());
  for (const Candidate& k : r.ranked) {
    EXPECT_EQ(k.layout.offload, config::Offload::kParams) << layout_flags(k.layout);
    EXPECT_EQ(k.layout.zero_stage, 3) << layout_flags(k.layout);
  }
  for (const Layout& l : enumerate_layouts(c, m)) EXPECT_NE(l.offload, config::Offload::kOptimizer) << layout_flags(l);
  // Its cost: the base's slices read at each gather, the adapters' tiny state stepped on the host.
  const Candidate& best = r.ranked.front();
  EXPECT_GT(best.time.offload, 0.0);
  c.lora.base_dtype = config::LoraBaseDtype::kNf4;  // the run keeps NF4 blocks on the device
  for (const Layout& l : enumerate_layouts(c, m)) EXPECT_EQ(l.offload, config::Offload::kNone) << layout_flags(l);
}

// F8: at long context a refusal's fixes try tensor parallelism with SP on the same ranks (the sweep's
// untied Llama at T=4096 on 2 ranks of 0.8 GiB, ZeRO-3 with full recompute: tp2 + SP fits, measured
// 609-614 MiB), and each fix it names fits when applied.
TEST(PlanFixes, TensorParallelismWithSequenceParallelismOnTheSameRanksIsTried) {
  std::vector<std::string> args = llama_args();
  for (const char* k : {"--model.seq_len=4096", "--train.global_batch=4", "--train.micro_batch=1", "--train.zero_stage=3",
                        "--train.recompute=full"})
    args.push_back(k);
  const config::Config c = parsed(args);
  const std::uint64_t capacity = static_cast<std::uint64_t>(0.8 * (1ull << 30));
  ASSERT_FALSE(plan_memory(c, 2, 1, capacity, config::Device::kCpu).fits());
  const std::vector<std::string> fixes = suggestions(c, 2, 1, capacity, config::Device::kCpu);
  const auto tp = std::find_if(fixes.begin(), fixes.end(), [](const std::string& f) { return f.starts_with("parallel.tp=2"); });
  ASSERT_NE(tp, fixes.end()) << fixes.front();
  EXPECT_NE(tp->find("parallel.tp=2 parallel.sequence_parallel=true with train.micro_batch=1"), std::string::npos) << *tp;
  for (const std::string& w : words(tp->substr(0, tp->find(" ("))))  // its keys, applied
    if (w.find('=') != std::string::npos) args.push_back("--" + w);
  const config::Config applied = parsed(args);
  EXPECT_EQ(applied.parallel.tp, 2);
  EXPECT_TRUE(plan_memory(applied, 2, 1, capacity, config::Device::kCpu).fits()) << *tp;
  // A refusal with no single fix points to the search instead of saying nothing fits.
  const std::vector<std::string> none = suggestions(c, 2, 1, 64ull << 20, config::Device::kCpu);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_NE(none.front().find("`ztrain --plan --plan.search` ranks every layout"), std::string::npos) << none.front();
}

// Full recomputation is offered at the largest micro-batch that fits with it, on the configured layout
// (outside sweep 42 G4: only the configured micro-batch was tried, so a long-context run was offered
// tensor parallelism alone), and the fix fits when applied.
TEST(PlanFixes, FullRecomputationWalksTheMicroBatchDown) {
  std::vector<std::string> args = llama_args();
  for (const char* k : {"--model.seq_len=2048", "--train.global_batch=8", "--train.micro_batch=8"}) args.push_back(k);
  const config::Config c = parsed(args);
  config::Config smaller = c;  // a capacity where full recompute fits at micro-batch 2 but not at 8
  smaller.train.recompute = config::Recompute::kFull, smaller.train.micro_batch = 2;
  const std::uint64_t capacity = plan_memory(smaller, 1, 1, 0, config::Device::kCpu).device_peak() + (1u << 20);
  smaller.train.micro_batch = 8;
  ASSERT_FALSE(plan_memory(smaller, 1, 1, capacity, config::Device::kCpu).fits());
  const std::vector<std::string> fixes = suggestions(c, 1, 1, capacity, config::Device::kCpu);
  const auto full = std::find_if(fixes.begin(), fixes.end(), [](const std::string& f) { return f.starts_with("train.recompute=full"); });
  ASSERT_NE(full, fixes.end()) << fixes.front();
  for (const std::string& w : words(*full))
    if (w.find('=') != std::string::npos) args.push_back("--" + w);
  const config::Config applied = parsed(args);
  EXPECT_EQ(applied.train.recompute, config::Recompute::kFull);
  EXPECT_LT(applied.train.micro_batch, 8) << *full;
  EXPECT_TRUE(plan_memory(applied, 1, 1, capacity, config::Device::kCpu).fits()) << *full;
}

}  // namespace
}  // namespace zt::plan
