// Cross-key checks and the batch arithmetic: each failure says the arithmetic and a valid fix.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/derived.hpp"
#include "config/lora.hpp"
#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/error.hpp"

namespace zt::config {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Derive, GradAccumFollowsFromGlobalMicroAndRanks) {
  Config c;
  c.train.global_batch = 96;
  c.train.micro_batch = 4;
  c.model.seq_len = 1024;
  Derived d = derive(c, 4);
  EXPECT_EQ(d.grad_accum, 6);
  EXPECT_EQ(d.tokens_per_step, 96 * 1024);
  EXPECT_EQ(derive(c, 1).grad_accum, 24);
}

TEST(Derive, IndivisibleBatchSaysTheArithmeticAndTheNearestValues) {
  Config c;
  c.train.global_batch = 96;
  c.train.micro_batch = 4;
  std::string msg = error_of([&] { derive(c, 5); });
  EXPECT_NE(msg.find("train.global_batch=96 is not divisible by train.micro_batch(4) x data-parallel ranks(5) = 20"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("use train.global_batch=80 or 100"), std::string::npos) << msg;
}

TEST(Derive, MicroLargerThanGlobalSuggestsValidMicroBatches) {
  Config c;
  c.train.global_batch = 8;
  c.train.micro_batch = 16;
  std::string msg = error_of([&] { derive(c, 2); });
  EXPECT_NE(msg.find("train.global_batch=32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train.micro_batch in {1, 2, 4}"), std::string::npos) << msg;
}

// The values a refusal suggests pass the rules that come after the split (sweep 8's F7): the interleaved
// schedule's groups of pp micro-batches and sequence parallelism's token rows.
TEST(Derive, SuggestedBatchesPassTheScheduleAndSequenceParallelRules) {
  Config c;
  c.model.n_layer = 4;
  c.parallel.pp = 2, c.parallel.vpp = 2, c.parallel.schedule = PipeSchedule::kInterleaved;
  c.train.global_batch = 12, c.train.micro_batch = 4;
  std::string msg = error_of([&] { derive(c, 4); });  // dp 2: 12 % 8
  EXPECT_NE(msg.find("use train.global_batch=16, or train.micro_batch in {1, 3}"), std::string::npos) << msg;
  c.train.global_batch = 12, c.train.micro_batch = 6;  // splits, but 1 micro-batch per step is no group of 2
  msg = error_of([&] { derive(c, 4); });
  EXPECT_NE(msg.find("use train.global_batch=24, or train.micro_batch in {1, 3}, or parallel.schedule=1f1b"),
            std::string::npos) << msg;
  for (std::int64_t m : {1, 3}) {
    c.train.micro_batch = m;
    EXPECT_NO_THROW(derive(c, 4)) << m;
  }
  Config sp;
  sp.parallel.tp = 2, sp.parallel.sequence_parallel = true;
  sp.model.seq_len = 63;
  sp.train.global_batch = 12, sp.train.micro_batch = 4;
  msg = error_of([&] { derive(sp, 4); });  // micro 3 would split the batch but not the 189 token rows
  EXPECT_NE(msg.find("or train.micro_batch in {2, 6}"), std::string::npos) << msg;
}

TEST(Derive, PipelineRunsWithZero01AndHostStagedTransfers) {
  Config c;
  c.parallel.pp = 2;
  c.train.zero_stage = 2;
  EXPECT_NE(error_of([&] { check_pipeline_runs(c, false); }).find("use train.zero_stage=0 or 1"), std::string::npos);
  c.train.zero_stage = 1;
  EXPECT_NO_THROW(check_pipeline_runs(c, false));
  EXPECT_NE(error_of([&] { check_pipeline_runs(c, true); }).find("use dist.backend=mpi"), std::string::npos);
  EXPECT_TRUE(uses_nccl(c, Device::kCuda));
  EXPECT_FALSE(uses_nccl(c, Device::kCpu));
  c.dist.backend = CommBackend::kMpi;
  EXPECT_FALSE(uses_nccl(c, Device::kCuda));
}

TEST(Derive, DebugRankOutsideTheWorldIsRejected) {
  Config c;
  c.debug.rank = 4;
  c.train.global_batch = 40;
  std::string msg = error_of([&] { derive(c, 4); });
  EXPECT_NE(msg.find("debug.rank=4 is outside the world of 4 rank(s): use debug.rank in [0, 3]"), std::string::npos) << msg;
  EXPECT_EQ(derive(c, 5).dp_size, 5);
}

TEST(Derive, TensorParallelRanksCountOnceInTheBatch) {
  Config c;
  c.train.global_batch = 8;
  c.train.micro_batch = 2;
  c.parallel.tp = 2;
  const Derived d = derive(c, 4);  // 2 TP groups of 2: two data-parallel ranks
  EXPECT_EQ(d.dp_size, 2);
  EXPECT_EQ(d.grad_accum, 2);
  c.parallel.tp = 4;
  EXPECT_EQ(derive(c, 4).dp_size, 1);
  EXPECT_EQ(derive(c, 4).grad_accum, 4);
}

TEST(Derive, TensorParallelDegreeThatDoesNotDivideTheWorldNamesTheValidDegrees) {
  Config c;
  c.parallel.tp = 4;
  std::string msg = error_of([&] { derive(c, 6); });
  EXPECT_NE(msg.find("parallel.tp=4 does not divide the world of 6 rank(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("parallel.tp in {1, 2}"), std::string::npos) << msg;  // and the 4 heads: not 3 or 6
}

TEST(Derive, BatchErrorUnderTensorParallelismSaysOnlyDataParallelRanksCount) {
  Config c;
  c.train.global_batch = 6;
  c.train.micro_batch = 1;
  c.parallel.tp = 2;
  std::string msg = error_of([&] { derive(c, 8); });  // 4 data-parallel ranks
  EXPECT_NE(msg.find("data-parallel ranks(4 = 8 ranks / parallel.tp=2) = 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("use train.global_batch=4 or 8"), std::string::npos) << msg;
}

TEST(Validate, SequenceParallelWithoutTensorParallelismIsRejected) {
  Config c;
  c.parallel.sequence_parallel = true;
  std::string msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("parallel.sequence_parallel=true"), std::string::npos) << msg;
  EXPECT_NE(msg.find("parallel.tp > 1"), std::string::npos) << msg;
  c.parallel.tp = 2;
  EXPECT_EQ(error_of([&] { validate(c); }), "");
}

// Sequence parallelism gives each TP rank an equal block of a micro-batch's B*T token rows (checked with
// the world: derive()).
TEST(Derive, SequenceParallelNeedsTpToDivideTheTokenRows) {
  Config c;
  c.model.n_head = 6, c.model.n_embd = 48, c.model.seq_len = 16;  // the default micro-batch of 4: 64 rows
  c.parallel.tp = 3;
  c.parallel.sequence_parallel = true;
  EXPECT_EQ(error_of([&] { validate(c); }), "");
  std::string msg = error_of([&] { derive(c, 3); });
  EXPECT_NE(msg.find("train.micro_batch x model.seq_len = 64 token rows, which 3 does not divide"), std::string::npos) << msg;
  // No divisor of train.global_batch=8 makes 16-token rows a multiple of 3: the context lengths that do.
  EXPECT_NE(msg.find("use model.seq_len=15 or 18, or parallel.sequence_parallel=false"), std::string::npos) << msg;
  c.train.micro_batch = 3, c.train.global_batch = 9;
  EXPECT_EQ(error_of([&] { derive(c, 3); }), "");
}

// The refusal names values that work (outside sweep 38 F3, 42 G1): the nearest context lengths at this
// micro-batch, and the micro-batches that split the rows and train.global_batch over the data-parallel ranks.
TEST(Derive, SequenceParallelRefusalNamesTheMicroBatchesAndLengthsThatWork) {
  Config c;
  c.model.seq_len = 63, c.train.micro_batch = 1, c.train.global_batch = 8;
  c.parallel.tp = 2, c.parallel.sequence_parallel = true;
  std::string msg = error_of([&] { derive(c, 2); });
  EXPECT_NE(msg.find("use model.seq_len=62 or 64, or train.micro_batch in {2, 4, 8}, or parallel.sequence_parallel=false"),
            std::string::npos) << msg;
  for (const std::int64_t m : {2, 4, 8}) {
    Config ok = c;
    ok.train.micro_batch = m;
    EXPECT_EQ(error_of([&] { derive(ok, 2); }), "") << m;
  }
  for (const std::int64_t t : {62, 64}) {
    Config ok = c;
    ok.model.seq_len = t;
    EXPECT_EQ(error_of([&] { derive(ok, 2); }), "") << t;
  }
  // 6 ranks = tp 2 x 3 data-parallel: only the micro-batches that also split the batch over 3 ranks.
  c.train.global_batch = 6;
  msg = error_of([&] { derive(c, 6); });
  EXPECT_NE(msg.find("or train.micro_batch in {2}, or"), std::string::npos) << msg;
  c.train.micro_batch = 2;
  EXPECT_EQ(error_of([&] { derive(c, 6); }), "");
}

// 8 heads (2 K/V heads) on 3 ranks: the world takes tp in {1, 3}, the model {1, 2}; each refusal names
// the degrees both take, {1} (outside sweep 38 F3: each named a value the other refused).
TEST(Derive, GridRefusalsNameTheDegreesTheWorldAndTheModelBothTake) {
  Config c;
  c.model.arch = Arch::kLlama, c.model.n_head = 8, c.model.n_kv_head = 2, c.model.n_embd = 128;
  c.train.global_batch = 6, c.train.micro_batch = 1;
  EXPECT_EQ(tp_degrees(c.model), (std::vector<std::int64_t>{1, 2}));
  c.model.n_kv_head = 8;
  EXPECT_EQ(tp_degrees(c.model), (std::vector<std::int64_t>{1, 2, 4, 8}));  // the MLP's 512 and the heads
  c.model.n_embd = 96;  // Llama's rule: a SwiGLU width of 256, 12-channel heads
  EXPECT_EQ(tp_degrees(c.model), (std::vector<std::int64_t>{1, 2, 4, 8}));
  c.model.ffn_hidden = 12;
  EXPECT_EQ(tp_degrees(c.model), (std::vector<std::int64_t>{1, 2, 4}));
  c.model.ffn_hidden = 0, c.model.n_embd = 128, c.model.n_kv_head = 2;
  EXPECT_EQ(tp_degrees(c.model, 3), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(tp_degrees(c.model, 6), (std::vector<std::int64_t>{1, 2}));
  c.parallel.tp = 2;
  std::string msg = error_of([&] { derive(c, 3); });
  EXPECT_NE(msg.find("parallel.tp=2 does not divide the world of 3 rank(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("use parallel.tp in {1} (the degrees that divide the world and the model's heads"), std::string::npos) << msg;
  EXPECT_NE(msg.find(", or a multiple of 2 ranks"), std::string::npos) << msg;
  c.parallel.tp = 3;  // the model refuses it: no "multiple of 3 ranks"
  msg = error_of([&] { derive(c, 4); });
  EXPECT_NE(msg.find("use parallel.tp in {1, 2} (the degrees"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("multiple of 3"), std::string::npos) << msg;
  // pp x tp: other tp at this pp, other pp at this tp, or more ranks; every value passes both rules.
  c.parallel.tp = 2, c.parallel.pp = 2;
  msg = error_of([&] { derive(c, 6); });
  EXPECT_NE(msg.find("parallel.pp=2 x parallel.tp=2 = 4 does not divide the world of 6 rank(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("use parallel.tp in {1} at parallel.pp=2 (the degrees that divide the world's 6 ranks / parallel.pp"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find(", parallel.pp in {1, 3} at parallel.tp=2, or a multiple of 4 ranks"), std::string::npos) << msg;
  for (const auto& [tp, pp] : {std::pair{1, 2}, std::pair{2, 1}, std::pair{2, 3}}) {
    Config ok = c;
    ok.parallel.tp = tp, ok.parallel.pp = pp;
    EXPECT_EQ(error_of([&] { derive(ok, 6); }), "") << tp << " x " << pp;
  }
}

TEST(Validate, ProductsOfKeysThatWouldOverflowAreRejected) {
  Config c;
  c.train.max_steps = 1'000'000'000;
  c.train.global_batch = 1 << 24;
  c.model.seq_len = 1 << 20;  // 2^74 tokens over the run
  std::string msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("train.max_steps=1000000000 x train.global_batch=16777216 x model.seq_len=1048576 (tokens over the run)"),
            std::string::npos) << msg;
  Config wide;
  wide.model.n_layer = 4096;
  wide.model.n_embd = 65536;
  wide.model.n_head = 64;
  wide.model.seq_len = 1 << 20;
  wide.train.micro_batch = 1 << 10;  // 2^4 x 2^10 x 2^20 x 2^12 x 2^16 activation elements
  msg = error_of([&] { validate(wide); });
  EXPECT_NE(msg.find("(activation elements per rank) exceeds 2^60"), std::string::npos) << msg;
  Config eval;
  eval.log.eval_batches = 1'000'000;
  eval.train.global_batch = 1 << 24;
  eval.model.seq_len = 1 << 20;
  eval.train.max_steps = 1;
  msg = error_of([&] { validate(eval); });
  EXPECT_NE(msg.find("(tokens per evaluation) exceeds 2^60"), std::string::npos) << msg;
  EXPECT_EQ(error_of([&] { validate(Config{}); }), "");
}

TEST(Validate, HeadsMustDivideWidth) {
  Config c;
  c.model.n_embd = 100;
  c.model.n_head = 3;
  std::string msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("model.n_embd=100 is not divisible by model.n_head=3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.n_embd=99 or 102"), std::string::npos) << msg;
  // Fewer channels than heads: the widths offered are whole heads, never n_embd=0 (outside its range),
  // and never above the table's 65536.
  c.model.n_embd = 1, c.model.n_head = 4;
  msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("model.n_embd=4 or 8"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(" or 0"), std::string::npos) << msg;
  c.model.n_embd = 100, c.model.n_head = 65536;
  msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("model.n_embd=65536"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("131072"), std::string::npos) << msg;
}

TEST(Validate, Contradictions) {
  Config c;
  c.optim.min_lr = 1;
  EXPECT_NE(error_of([&] { validate(c); }).find("optim.min_lr=1 is above optim.lr"), std::string::npos);
  c.optim.schedule = Schedule::kLinear;  // the schedule the run uses is named (outside sweep 37 F9) ...
  EXPECT_NE(error_of([&] { validate(c); }).find("the linear schedule (optim.schedule) decays"), std::string::npos);
  c.optim.schedule = Schedule::kConstant;  // ... and one that never reads min_lr takes any
  EXPECT_NO_THROW(validate(c));
  c = Config{};
  c.train.stop_at_step = 500;
  EXPECT_NE(error_of([&] { validate(c); }).find("train.stop_at_step=500"), std::string::npos);
  c = Config{};
  c.train.device = Device::kCpu;  // the CPU backend emulates 16-bit storage: the CUDA backend's reference
  c.train.precision = Precision::kBf16;
  EXPECT_NO_THROW(validate(c));
  c = Config{};
  c.log.eval_every = 10;
  EXPECT_NE(error_of([&] { validate(c); }).find("data.valid"), std::string::npos);
  c = Config{};
  c.train.offload = Offload::kOptimizer;
  EXPECT_NE(error_of([&] { validate(c); }).find("train.zero_stage >= 1"), std::string::npos);
  c = Config{};
  c.train.loss_scale = "big";
  EXPECT_NE(error_of([&] { validate(c); }).find("train.loss_scale=big"), std::string::npos);
  c = Config{};
  c.data.reset_positions = true;  // positions restart at the documents the mask keeps apart
  EXPECT_NE(error_of([&] { validate(c); }).find("set data.document_mask=true too"), std::string::npos);
  c.data.document_mask = true;
  EXPECT_NO_THROW(validate(c));
}

TEST(Validate, DefaultsAreValid) { EXPECT_NO_THROW(validate(Config{})); }

// offload.to=nvme needs something offloaded and a directory; the NVMe keys mean nothing on the host tier.
TEST(Validate, OffloadToNvmeNeedsOptimizerOffloadAndADirectory) {
  Config c;
  c.offload.to = OffloadTo::kNvme;
  c.offload.nvme_dir = "/nvme";
  std::string msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("train.offload=none offloads nothing"), std::string::npos) << msg;
  c.train.offload = Offload::kOptimizer;
  c.train.zero_stage = 1;
  EXPECT_NO_THROW(validate(c));
  c.offload.nvme_dir = "";
  msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("offload.to=nvme needs offload.nvme_dir"), std::string::npos) << msg;
  c.offload.to = OffloadTo::kHost;
  c.offload.nvme_dir = "/nvme";
  msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("offload.nvme_dir is set but offload.to=host ignores it"), std::string::npos) << msg;
  c.offload.nvme_dir = "";
  c.offload.nvme_chunk_mb = 8;
  EXPECT_NE(error_of([&] { validate(c); }).find("offload.nvme_chunk_mb is set"), std::string::npos);
}

// train.offload=params offloads ZeRO-3's parameter shard: other stages and an NF4 base are refused, naming
// the stage and the fix; zero.reduce_dtype=compute is for the stages that reduce unit by unit (2-3).
TEST(Validate, ParamOffloadNeedsZero3AndReduceInComputeNeedsStage2) {
  Config c;
  c.train.offload = Offload::kParams;
  for (std::int64_t stage : {0, 1, 2}) {
    c.train.zero_stage = stage;
    const std::string msg = error_of([&] { validate(c); });
    EXPECT_NE(msg.find("train.offload=params needs train.zero_stage=3 (this run: " + std::to_string(stage) + ")"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("Fix:"), std::string::npos) << msg;
  }
  c.train.zero_stage = 3;
  EXPECT_NO_THROW(validate(c));
  c.offload.to = OffloadTo::kNvme;
  c.offload.nvme_dir = "/nvme";
  EXPECT_NO_THROW(validate(c));
  c.lora.rank = 8;
  c.lora.base_dtype = LoraBaseDtype::kNf4;
  EXPECT_NE(error_of([&] { validate(c); }).find("train.offload=params does not take an NF4 base"), std::string::npos);

  c = Config{};
  c.zero.reduce_dtype = ReduceDtype::kCompute;
  for (std::int64_t stage : {0, 1}) {
    c.train.zero_stage = stage;
    const std::string msg = error_of([&] { validate(c); });
    EXPECT_NE(msg.find("zero.reduce_dtype=compute needs train.zero_stage 2 or 3 (this run: " + std::to_string(stage) + ")"),
              std::string::npos) << msg;
  }
  c.train.zero_stage = 2;
  EXPECT_NO_THROW(validate(c));
}

TEST(Validate, LlamaKeysGivenToGpt2NameTheKeyAndTheFix) {
  Config c;
  c.model.n_kv_head = 2;
  std::string msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("model.n_kv_head=2 applies to model.arch=llama only"), std::string::npos) << msg;
  EXPECT_NE(msg.find("set model.arch=llama"), std::string::npos) << msg;
  c.model.n_kv_head = c.model.n_head;  // the same as MHA: harmless
  EXPECT_NO_THROW(validate(c));
  c.model.rope_scaling = RopeScaling::kLlama3;
  EXPECT_NE(error_of([&] { validate(c); }).find("model.rope_scaling=llama3 applies"), std::string::npos);
  c.model.rope_scaling = RopeScaling::kNone;
  c.model.qkv_bias = true;  // GPT-2's c_attn always has its bias
  EXPECT_NE(error_of([&] { validate(c); }).find("model.qkv_bias=true applies"), std::string::npos);
  c.model.qkv_bias = false;
  c.model.tie_embeddings = TieEmbeddings::kFalse;
  EXPECT_NE(error_of([&] { validate(c); }).find("model.tie_embeddings=false"), std::string::npos);
}

TEST(Validate, LlamaKvHeadsMustDivideHeads) {
  Config c;
  c.model.arch = Arch::kLlama;
  c.model.n_head = 6;
  c.model.n_embd = 96;
  c.model.n_kv_head = 4;
  std::string msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("model.n_kv_head=4 does not divide model.n_head=6"), std::string::npos) << msg;
  EXPECT_NE(msg.find("{1, 2, 3, 6}"), std::string::npos) << msg;
  for (int kv : {0, 1, 2, 3, 6}) {
    c.model.n_kv_head = kv;
    EXPECT_NO_THROW(validate(c)) << kv;
  }
  c.model.n_kv_head = 12;
  EXPECT_FALSE(error_of([&] { validate(c); }).empty());
}

TEST(Validate, LlamaHeadSizeMustBeEvenForRope) {
  Config c;
  c.model.arch = Arch::kLlama;
  c.model.n_head = 4;
  c.model.n_embd = 36;  // head size 9
  EXPECT_NE(error_of([&] { validate(c); }).find("is odd: RoPE rotates pairs"), std::string::npos);
}

TEST(Validate, LlamaRopeScalingKeysNeedLlama3AndOrderedFactors) {
  Config c;
  c.model.arch = Arch::kLlama;
  c.model.rope_factor = 32;
  EXPECT_NE(error_of([&] { validate(c); }).find("model.rope_scaling=none ignores them"), std::string::npos);
  c.model.rope_scaling = RopeScaling::kLlama3;
  EXPECT_NO_THROW(validate(c));
  c.model.rope_high_freq_factor = 1;
  EXPECT_NE(error_of([&] { validate(c); }).find("model.rope_high_freq_factor=1 must be above"), std::string::npos);
}

TEST(Validate, LlamaFfnWidthComesFromOneRule) {
  Config c;
  c.model.arch = Arch::kLlama;
  c.model.ffn_hidden = 300;
  EXPECT_NO_THROW(validate(c));
  c.model.ffn_multiplier = 1.3;
  EXPECT_NE(error_of([&] { validate(c); }).find("give one or the other"), std::string::npos);
}

TEST(Validate, LoraTargetsAreEitherFamilysModuleNames) {
  Config c;
  c.lora.rank = 8;
  EXPECT_EQ(lora_target_modules(c), (std::vector<std::string>{"c_attn"}));  // PEFT's GPT-2 default
  c.lora.targets = "c_fc, c_attn,c_proj";
  EXPECT_EQ(lora_target_modules(c), (std::vector<std::string>{"c_attn", "c_proj", "c_fc"}));  // family order
  c.lora.targets = "q,v";
  EXPECT_NE(error_of([&] { validate(c); }).find("model.arch=gpt2 has no module 'q'; use a comma-separated subset of c_attn,c_proj,c_fc"),
            std::string::npos);
  c.model.arch = Arch::kLlama;
  EXPECT_NO_THROW(validate(c));
  c.lora.targets = "q,k_proj,down";
  EXPECT_EQ(lora_target_modules(c), (std::vector<std::string>{"q_proj", "k_proj", "down_proj"}));
  c.lora.targets = "";
  EXPECT_EQ(lora_target_modules(c), (std::vector<std::string>{"q_proj", "v_proj"}));
  c.lora.targets = "all-linear";  // PEFT's keyword, as an adapter_config.json gives it (outside sweep 27 F6)
  EXPECT_EQ(lora_target_modules(c).size(), 7u);
  // Errors name what the user wrote (issue 36), not the name it was read as.
  c.lora.targets = "q, c_attn";
  EXPECT_NE(error_of([&] { validate(c); }).find("lora.targets=q, c_attn: model.arch=llama has no module 'c_attn'; use a "
                                                "comma-separated subset of q_proj,"),
            std::string::npos);
  c.lora.targets = "q,lm_head";  // outside the blocks: said so, under the name written (sweep 24 F4)
  EXPECT_NE(error_of([&] { validate(c); }).find("has no module 'lm_head' that LoRA adapts here (only the blocks' linear"),
            std::string::npos);
  c.lora.targets = "q,,v";
  EXPECT_NE(error_of([&] { validate(c); }).find("lora.targets=q,,v has an empty name"), std::string::npos);
  // PEFT matches a target as the end of a module's name: the module's path in its block names it too.
  c.lora.targets = "self_attn.q_proj,mlp.down_proj";
  EXPECT_EQ(lora_target_modules(c), (std::vector<std::string>{"q_proj", "down_proj"}));
  c.lora.targets = "layers.0.self_attn.q_proj";  // one layer only: not a ztrain target
  EXPECT_NE(error_of([&] { validate(c); }).find("has no module 'layers.0.self_attn.q_proj'"), std::string::npos);
  c.model.arch = Arch::kGpt2;
  c.lora.targets = "attn.c_attn,attn.c_proj,mlp.c_proj";
  EXPECT_EQ(lora_target_modules(c), (std::vector<std::string>{"c_attn", "c_proj"}));
  c.lora.targets = "attn.c_attn,mlp.c_proj";  // one of GPT-2's two c_proj alone
  EXPECT_NE(error_of([&] { validate(c); }).find("mlp.c_proj alone: ztrain's GPT-2 adapts c_proj as one target"),
            std::string::npos);
}

// init.from a PEFT adapter directory: its target_modules are named as its own, never as lora.targets.
TEST(Validate, AdapterTargetModulesAreNamedAsTheAdaptersOwn) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("zt_adapter_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto adapter = [&](const std::string& modules) {
    std::ofstream(dir / "adapter_config.json") << "{\"peft_type\": \"LORA\", \"r\": 8, \"lora_alpha\": 16, "
                                                  "\"target_modules\": [" << modules << "]}";
  };
  Config c;
  c.model.arch = Arch::kLlama;
  c.lora.rank = 8;
  c.lora.alpha = 16;
  c.init.from = dir.string();
  c.lora.targets = "q,v";
  adapter("\"q_proj\", \"embed_tokens\"");
  std::string msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("target_modules [q_proj,embed_tokens] in " + (dir / "adapter_config.json").string() +
                     ": model.arch=llama has no module 'embed_tokens'"), std::string::npos) << msg;
  adapter("\"q_proj\", \"k_proj\"");
  msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("lora.targets=q,v (modules q_proj,v_proj) disagrees with target_modules [q_proj,k_proj] in "),
            std::string::npos) << msg;
  EXPECT_NE(msg.find(": set lora.targets=q_proj,k_proj"), std::string::npos) << msg;
  std::filesystem::remove_all(dir);
}

TEST(Validate, LoraScaleAndTheKeysItNeeds) {
  Config c;
  c.lora.rank = 16;
  c.lora.alpha = 32;
  EXPECT_DOUBLE_EQ(lora_scale(c.lora), 2.0);
  c.lora.rslora = true;
  EXPECT_DOUBLE_EQ(lora_scale(c.lora), 8.0);
  c.parallel.tp = 2;  // LoRA trains under tensor parallelism: no lora.* complaint
  EXPECT_EQ(error_of([&] { validate(c); }).find("lora"), std::string::npos);
  Config off;
  off.lora.targets = "c_attn";  // rank 0: LoRA is off, a target is a mistake
  EXPECT_NE(error_of([&] { validate(off); }).find("lora.rank=0 turns LoRA off"), std::string::npos);
  Config dropout;
  dropout.lora.dropout = 0.1;  // likewise (sweep 30 F4: accepted)
  EXPECT_NE(error_of([&] { validate(dropout); }).find("lora.dropout / "), std::string::npos);
}

// lora.base_dtype: nf4 at every ZeRO stage (sharded at 3); bf16/fp32 only as the compute dtype; double
// quantization with nf4 only; none of it without LoRA. Each refusal names the key, the value and the fix.
TEST(Validate, LoraBaseDtypeAndTheLayoutsItRunsOn) {
  Config c;
  c.lora.rank = 4;
  const Option* o = find_option("lora.base_dtype");
  ASSERT_NE(o, nullptr);
  o->assign(c, "nf4");
  EXPECT_EQ(c.lora.base_dtype, LoraBaseDtype::kNf4);
  c.lora.base_double_quant = true;
  for (int stage : {0, 1, 2, 3}) {
    c.train.zero_stage = stage;
    EXPECT_EQ(error_of([&] { validate(c); }).find("lora"), std::string::npos) << stage;
  }
  c.train.zero_stage = 0;
  c.lora.base_dtype = LoraBaseDtype::kBf16;  // fp32 compute
  EXPECT_NE(error_of([&] { validate(c); }).find("lora.base_double_quant=true quantizes an NF4 base's scales, but "
                                                "lora.base_dtype=bf16"), std::string::npos);
  c.lora.base_double_quant = false;
  EXPECT_NE(error_of([&] { validate(c); }).find("lora.base_dtype=bf16 with train.precision=fp32: "), std::string::npos);
  c.train.precision = Precision::kBf16;
  EXPECT_EQ(error_of([&] { validate(c); }).find("lora"), std::string::npos);
  c.lora.base_dtype = LoraBaseDtype::kFp32;
  EXPECT_NE(error_of([&] { validate(c); }).find("or train.precision=fp32"), std::string::npos);
  Config off;
  off.lora.base_dtype = LoraBaseDtype::kNf4;
  EXPECT_NE(error_of([&] { validate(off); }).find("lora.rank=0 turns LoRA off"), std::string::npos);
  EXPECT_NE(error_of([&] { o->assign(c, "int4"); }).find("int4"), std::string::npos);
}

TEST(Validate, LoraDropoutIsAProbabilityBelowOne) {
  Config c;
  const Option* o = find_option("lora.dropout");
  ASSERT_NE(o, nullptr);
  EXPECT_NO_THROW(o->assign(c, "0.05"));
  EXPECT_DOUBLE_EQ(c.lora.dropout, 0.05);
  EXPECT_NE(error_of([&] { o->assign(c, "1"); }).find("must be in [0, 0.9999999]"), std::string::npos);
  // Held in fp32 (the masks, AdamW's state): a value that rounds to 1.0f is refused, not a run-time failure
  // (dropout p=1) or a NaN loss (1 - beta^t = 0).
  for (const char* key : {"lora.dropout", "optim.beta1", "optim.beta2"}) {
    const Option* k = find_option(key);
    ASSERT_NE(k, nullptr);
    EXPECT_NE(error_of([&] { k->assign(c, "0.99999999"); }).find("must be in [0, 0.9999999]"), std::string::npos) << key;
    EXPECT_NO_THROW(k->assign(c, "0.9999999")) << key;
    EXPECT_LT(static_cast<float>(0.9999999), 1.0f);
  }
}

// Keys of a feature that is off do nothing: refused, as lora.* without lora.rank is (sweep 18 F7).
TEST(Validate, KeysOfAFeatureThatIsOffAreRefused) {
  Config c;
  c.rl.reward = "bogus";
  c.rl.algorithm = RlAlgorithm::kPpo;
  std::string msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("rl.algorithm / rl.reward given, but RL is off without rl.prompts"), std::string::npos) << msg;
  c = Config{};
  c.log.eval_answer_rule = "bogus";
  msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("log.eval_answer_rule given, but the answer evaluation is off without log.eval_prompts"),
            std::string::npos) << msg;
  EXPECT_EQ(error_of([&] { validate(Config{}); }), "");
}

TEST(Validate, PipelineLayersAreCountsPerStageSummingToTheBlocks) {
  Config c;
  c.model.n_layer = 12;
  c.parallel.pp = 2;
  EXPECT_TRUE(pipeline_layers(c).empty());  // unset: balanced by cost
  c.parallel.pp_layers = "5, 7";
  EXPECT_EQ(pipeline_layers(c), (std::vector<int>{5, 7}));
  validate(c);
  c.parallel.pp_layers = "5,6";
  std::string msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("parallel.pp_layers=5,6 gives 2 stage(s) of 11 blocks, and the pipeline has parallel.pp=2 stages of "
                     "model.n_layer=12 blocks: give 2 counts summing to 12"), std::string::npos) << msg;
  c.parallel.pp_layers = "12,0";
  msg = error_of([&] { validate(c); });
  EXPECT_NE(msg.find("'0' is not a block count in [1, model.n_layer=12]"), std::string::npos) << msg;
  c.parallel.pp_layers = "6,6x";
  EXPECT_NE(error_of([&] { validate(c); }).find("'6x' is not a block count"), std::string::npos);
  // Interleaved: one count per virtual stage (pp x vpp of them).
  c.parallel.vpp = 2;
  c.parallel.schedule = PipeSchedule::kInterleaved;
  c.parallel.pp_layers = "6,6";
  EXPECT_NE(error_of([&] { validate(c); }).find("parallel.pp x parallel.vpp = 4 stages"), std::string::npos);
  c.parallel.pp_layers = "2,4,4,2";
  EXPECT_EQ(pipeline_layers(c), (std::vector<int>{2, 4, 4, 2}));
}

}  // namespace
}  // namespace zt::config
