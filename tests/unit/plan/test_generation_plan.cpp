// The memory plan of a run that generates beside its training: RL's rollouts and the answer evaluation
// at log.eval_every. Their engine (and at ZeRO-3 the whole weights gathered for it) is freed before an
// optimizer step's transient buffers are taken, and PPO's critic steps before the actor: the total is
// the held rows plus the largest phase. A known sequence length (the longest prompt + its new tokens)
// plans a smaller engine than model.seq_len's bound, and a plan the engine keeps from fitting names the
// slot count that fits. (That each total is the allocator's peak is tests/rl/grpo.sh's, on the CPU.)
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backend/attention_support.hpp"
#include "config/config.hpp"
#include "gen/engine.hpp"
#include "plan/memory_plan.hpp"

namespace zt::plan {
namespace {

// A Qwen2.5-0.5B-like Llama in bf16 at T 2048, 8 ranks.
config::Config qwen_like() {
  config::Config c;
  c.model.arch = config::Arch::kLlama;
  c.model.n_layer = 24;
  c.model.n_head = 14;
  c.model.n_kv_head = 2;
  c.model.n_embd = 896;
  c.model.ffn_hidden = 4864;
  c.model.vocab_size = 151936;
  c.model.seq_len = 2048;
  c.model.qkv_bias = true;
  c.train.precision = config::Precision::kBf16;
  c.train.micro_batch = 4;
  c.train.global_batch = 32;
  return c;
}

const PlanRow* row(const MemoryPlan& p, const std::string& what) {
  for (const PlanRow& r : p.rows)
    if (r.what == what) return &r;
  return nullptr;
}

std::uint64_t sum_of(const MemoryPlan& p, Phase phase) {
  std::uint64_t bytes = 0;
  for (const PlanRow& r : p.rows) bytes += r.phase == phase ? r.bytes : 0;
  return bytes;
}

TEST(GenerationPlan, ThePeakIsTheHeldRowsPlusTheLargestPhase) {
  config::Config c = qwen_like();
  c.rl.prompts = "prompts.jsonl";
  c.rl.algorithm = config::RlAlgorithm::kPpo;
  c.train.zero_stage = 3;
  const MemoryPlan p = plan_memory(c, 8, 1, 0, config::Device::kCuda);
  ASSERT_NE(row(p, "rollout engine"), nullptr);
  ASSERT_NE(row(p, "rollout weights"), nullptr) << "ZeRO-3 gathers the whole weights for the rollouts";
  EXPECT_EQ(row(p, "rollout engine")->phase, Phase::kGeneration);
  EXPECT_EQ(row(p, "communication buffers")->phase, Phase::kUpdate);
  EXPECT_EQ(row(p, "critic comm buffers")->phase, Phase::kCriticUpdate);
  const std::uint64_t generation = sum_of(p, Phase::kGeneration), actor = sum_of(p, Phase::kUpdate),
                      critic = sum_of(p, Phase::kCriticUpdate), held = sum_of(p, Phase::kHeld);
  EXPECT_GT(actor, 0u);
  EXPECT_GT(critic, 0u);
  EXPECT_EQ(p.total_bytes, held + std::max({generation, actor, critic}));
  EXPECT_LT(p.total_bytes, held + generation + actor + critic);
  EXPECT_EQ(peak_of(p.rows), p.total_bytes);
}

// rl.kl_coef's reference: a whole copy a rank below ZeRO-3; at ZeRO-3 a 1/W slice, its units gathered in
// its own pass (a phase of its own).
TEST(GenerationPlan, TheKlReferenceIsShardedAtZero3) {
  config::Config c = qwen_like();
  c.rl.prompts = "prompts.jsonl";
  c.rl.kl_coef = 0.05;
  c.train.zero_stage = 2;
  const MemoryPlan whole = plan_memory(c, 8, 1, 0, config::Device::kCuda);
  c.train.zero_stage = 3;
  const MemoryPlan sharded = plan_memory(c, 8, 1, 0, config::Device::kCuda);
  ASSERT_NE(row(whole, "reference policy"), nullptr);
  ASSERT_NE(row(sharded, "reference policy"), nullptr);
  EXPECT_LT(row(sharded, "reference policy")->bytes * 7, row(whole, "reference policy")->bytes) << "1/8 of it, padded";
  ASSERT_NE(row(sharded, "reference units"), nullptr);
  EXPECT_EQ(row(sharded, "reference units")->phase, Phase::kReference);
  EXPECT_EQ(row(whole, "reference units"), nullptr);
  c.lora.rank = 8;  // a LoRA actor's reference is its frozen base: no copy
  EXPECT_EQ(row(plan_memory(c, 8, 1, 0, config::Device::kCuda), "reference policy"), nullptr);
}

TEST(GenerationPlan, AKnownLengthPlansASmallerEngineThanTheSeqLenBound) {
  config::Config c = qwen_like();
  c.rl.prompts = "prompts.jsonl";
  c.rl.max_new_tokens = 256;
  const MemoryPlan bound = plan_memory(c, 8, 1, 0, config::Device::kCuda);
  const MemoryPlan known = plan_memory(c, 8, 1, 0, config::Device::kCuda, {.rollouts = 320});
  EXPECT_NE(row(bound, "rollout engine")->note.find("model.seq_len, their bound"), std::string::npos);
  EXPECT_NE(row(known, "rollout engine")->note.find("of 320 tokens (the longest prompt + rl.max_new_tokens)"),
            std::string::npos)
      << row(known, "rollout engine")->note;
  EXPECT_LT(row(known, "rollout engine")->bytes * 5, row(bound, "rollout engine")->bytes)
      << "320 tokens against 2048: the KV cache is most of the engine";
  // A length past model.seq_len is bounded by it.
  EXPECT_EQ(plan_memory(c, 8, 1, 0, config::Device::kCuda, {.rollouts = 5000}).total_bytes, bound.total_bytes);
  // The engine has at most the rank's sequences as slots: 4 prompts x 2 responses over 8 ranks is 1 each.
  c.rl.batch = 8, c.rl.group_size = 2;
  EXPECT_NE(row(plan_memory(c, 8, 1, 0), "rollout engine")->note.find("2 sequences"), std::string::npos);
}

TEST(GenerationPlan, TheAnswerEvaluationIsPlannedWithItsSlots) {
  config::Config c = qwen_like();
  EXPECT_EQ(row(plan_memory(c, 8, 1, 0, config::Device::kCuda), "evaluation engine"), nullptr);
  c.log.eval_prompts = "eval.jsonl";
  c.log.eval_every = 100;
  c.train.zero_stage = 3;
  const MemoryPlan p = plan_memory(c, 8, 1, 0, config::Device::kCuda, {.evaluation = 512});
  ASSERT_NE(row(p, "evaluation engine"), nullptr);
  EXPECT_NE(row(p, "evaluation engine")->note.find("32 sequences of 512 tokens"), std::string::npos);
  ASSERT_NE(row(p, "evaluation weights"), nullptr);
  EXPECT_EQ(row(p, "evaluation weights")->phase, Phase::kGeneration);
  c.log.eval_slots = 8;
  const MemoryPlan fewer = plan_memory(c, 8, 1, 0, config::Device::kCuda, {.evaluation = 512});
  EXPECT_LT(row(fewer, "evaluation engine")->bytes, row(p, "evaluation engine")->bytes);
  // 25 prompts dealt over 8 ranks, 2 samples each: the busiest rank decodes 4 x 2 = 8 sequences at most.
  c.log.eval_slots = 32, c.log.eval_samples = 2;
  const MemoryPlan dealt = plan_memory(c, 8, 1, 0, config::Device::kCuda, {.evaluation = 512, .evaluation_prompts = 25});
  EXPECT_NE(row(dealt, "evaluation engine")->note.find("8 sequences of 512 tokens"), std::string::npos)
      << row(dealt, "evaluation engine")->note;
  EXPECT_EQ(gen::dealt_slots(32, 25, 2, 8), 8);
  EXPECT_EQ(gen::dealt_slots(4, 25, 2, 8), 4);
  EXPECT_EQ(gen::dealt_slots(32, 0, 2, 8), 32);
}

// With the capacity just under what 32 evaluation slots need, the fixes name log.eval_slots; an RL run's
// rollouts likewise name rl.slots.
TEST(GenerationPlan, APlanTheEngineKeepsFromFittingNamesTheSlotsThatFit) {
  config::Config c = qwen_like();
  c.log.eval_prompts = "eval.jsonl";
  c.log.eval_every = 100;
  const MemoryPlan p = plan_memory(c, 8, 1, 0, config::Device::kCuda);
  const std::uint64_t capacity = p.total_bytes - row(p, "evaluation engine")->bytes / 3;
  ASSERT_FALSE(plan_memory(c, 8, 1, capacity, config::Device::kCuda).fits());
  const std::vector<std::string> fixes = suggestions(c, 8, 1, capacity, config::Device::kCuda);
  EXPECT_TRUE(std::any_of(fixes.begin(), fixes.end(), [](const std::string& f) { return f.rfind("log.eval_slots=", 0) == 0; }))
      << "fixes: " << fixes.size();
  config::Config rl = qwen_like();
  rl.rl.prompts = "prompts.jsonl";
  rl.rl.slots = 64;
  const MemoryPlan q = plan_memory(rl, 8, 1, 0, config::Device::kCuda);
  const std::vector<std::string> rl_fixes =
      suggestions(rl, 8, 1, q.total_bytes - row(q, "rollout engine")->bytes / 3, config::Device::kCuda);
  EXPECT_TRUE(std::any_of(rl_fixes.begin(), rl_fixes.end(), [](const std::string& f) { return f.rfind("rl.slots=", 0) == 0; }));
}

// A fix the run would refuse is no fix: the micro-batches named divide the batch, the rank counts split it
// (global_batch 12 on 1 rank, micro_batch 6, too little memory: 4 or 3, never 5).
TEST(GenerationPlan, FixesAreOnlyLayoutsTheRunTakes) {
  config::Config c = qwen_like();
  c.train.global_batch = 12;
  c.train.micro_batch = 6;
  const MemoryPlan p = plan_memory(c, 1, 1, 0, config::Device::kCuda);
  const std::uint64_t capacity = p.total_bytes - p.total_bytes / 20;
  ASSERT_FALSE(plan_memory(c, 1, 1, capacity, config::Device::kCuda).fits());
  for (const std::string& f : suggestions(c, 1, 1, capacity, config::Device::kCuda)) {
    if (const std::size_t at = f.find("train.micro_batch="); at != std::string::npos) {
      EXPECT_EQ(12 % std::stoi(f.substr(at + 18)), 0) << f;
    }
    if (const std::size_t at = f.find(" ranks at"); at != std::string::npos) {
      EXPECT_EQ(12 % std::stoi(f.substr(0, at)), 0) << f;
    }
  }
}

// On CPU ranks a host's memory is shared by the ranks on it: a rank count offered as a fix is planned with
// the host's memory over as many as a host takes (plan.gpus_per_node), so the layout it names fits when
// planned (outside sweep 30 F3: 16 ranks were offered on the current rank's whole share).
TEST(GenerationPlan, ARankCountOfferedOnCpuRanksFitsInItsShareOfTheHost) {
  config::Config c = qwen_like();
  // A model whose optimizer state, not its activations or its embedding, is most of a CPU rank's memory,
  // so that more ranks sharing the host can be the fix (each rank's reduction scratch grows with the
  // largest unit: memory_plan.cpp cpu_outside_bytes).
  c.model.vocab_size = 32000;
  c.model.seq_len = 256;
  c.train.micro_batch = 1;
  c.train.zero_stage = 1;
  c.plan.gpus_per_node = 2;
  const MemoryPlan p = plan_memory(c, 1, 1, 0, config::Device::kCpu);
  int offered = 0;
  // Capacities below the one rank's step peak (with what lives outside the allocator and rank 0's
  // checkpoint save), where more ranks are the fix.
  const std::uint64_t peak = p.device_peak();
  for (const std::uint64_t capacity : {peak * 9 / 10, peak * 4 / 5, peak * 7 / 10, peak * 3 / 5, peak / 2}) {
    for (const std::string& f : suggestions(c, 1, 1, capacity, config::Device::kCpu, {}, /*ranks_on_host=*/1)) {
      const std::size_t at = f.find(" ranks");
      if (at == std::string::npos || f.find_first_not_of("0123456789") != at) continue;
      const std::int64_t w = std::stoll(f.substr(0, at));
      config::Config k = c;
      k.train.zero_stage = std::stoll(f.substr(f.find("train.zero_stage=") + 17));
      if (f.find("recompute=full") != std::string::npos) k.train.recompute = config::Recompute::kFull;
      if (const std::size_t gb = f.find("train.global_batch="); gb != std::string::npos)
        k.train.global_batch = std::stoll(f.substr(gb + 19));
      const std::uint64_t share = capacity / static_cast<std::uint64_t>(std::min<std::int64_t>(w, 2));
      EXPECT_TRUE(plan_memory(k, w, 1, share, config::Device::kCpu).fits()) << f << " at capacity " << capacity;
      ++offered;
    }
  }
  EXPECT_GT(offered, 0) << "no rank count was offered: the case checks nothing";
}

// The CUDA backend's attention over the cache has a scratch of its own (its split partials, at most
// kCachedAttentionScratchBudget a call); the CPU's does not: the engine row says so on each.
TEST(GenerationPlan, TheCudaEngineCountsItsCachedAttentionScratch) {
  config::Config c = qwen_like();
  c.log.eval_prompts = "eval.jsonl";
  c.log.eval_every = 100;
  const MemoryPlan gpu = plan_memory(c, 8, 1, 0, config::Device::kCuda, {.evaluation = 2048});
  const MemoryPlan cpu = plan_memory(c, 8, 1, 0, config::Device::kCpu, {.evaluation = 2048});
  const std::int64_t prefill_queries = 4 * 2048 * 14;  // the evaluation prefills 4 rows of its whole length
  EXPECT_EQ(row(gpu, "evaluation engine")->bytes - row(cpu, "evaluation engine")->bytes,
            backend::cached_attention_scratch_bytes(prefill_queries, 2048, 64));
  EXPECT_LE(row(gpu, "evaluation engine")->bytes - row(cpu, "evaluation engine")->bytes,
            backend::kCachedAttentionScratchBudget);
}

}  // namespace
}  // namespace zt::plan
