// Where cuDNN's fused SDPA runs (backend/attention_support.hpp) and the plan cache that keeps one plan
// per shape (backend/cuda/sdpa_plan_cache.hpp): pure host logic, checked without cuDNN or a GPU. The
// support rule's cases follow cuDNN's SDPA support matrix (fp16/bf16 only, head sizes multiples of 8
// up to 256 on Hopper and 128 elsewhere, compute capability 8.0+, the 9.10.0/9.10.1 forward bug, the
// key-length bug of the backward up to 9.15.0, deterministic Blackwell backward from 9.18).
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/attention_support.hpp"
#include "backend/cuda/sdpa_plan_cache.hpp"

namespace zt::backend {
namespace {

// GPT-2 124M's attention in bf16: 12 heads of 64, T 1024.
AttentionQuery gpt2() { return {DType::kBF16, 64, 12, 12, 1024, false}; }
constexpr CudnnRuntime kH100{90, 91900, true};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CudnnAttentionSupport, Gpt2AndLlamaShapesRunOnHopperWithARecentCudnn) {
  EXPECT_EQ(cudnn_attention_refusal(gpt2(), &kH100), "");
  AttentionQuery llama{DType::kBF16, 64, 32, 8, 2048, false};  // Llama 3.2 1B: GQA, 32 over 8 K/V heads
  EXPECT_EQ(cudnn_attention_refusal(llama, &kH100), "");
  llama.n_kv_head = 1;  // multi-query
  EXPECT_EQ(cudnn_attention_refusal(llama, &kH100), "");
  AttentionQuery f16 = gpt2();
  f16.dtype = DType::kF16;
  f16.head_size = 128;
  EXPECT_EQ(cudnn_attention_refusal(f16, &kH100), "");
  f16.seq_len = 97;  // odd lengths run on a cuDNN newer than 9.15
  EXPECT_EQ(cudnn_attention_refusal(f16, &kH100), "");
}

TEST(CudnnAttentionSupport, Fp32AndDocumentMasksAreRefusedNamingTheirKeys) {
  AttentionQuery q = gpt2();
  q.dtype = DType::kF32;
  EXPECT_TRUE(contains(cudnn_attention_refusal(q, nullptr), "train.precision=fp32"));
  q = gpt2();
  q.document_mask = true;
  EXPECT_TRUE(contains(cudnn_attention_refusal(q, nullptr), "data.document_mask=true"));
  EXPECT_TRUE(contains(cudnn_attention_refusal(q, &kH100), "data.document_mask=true"));
}

TEST(CudnnAttentionSupport, HeadSizesMustBeMultiplesOf8UpTo256OnHopperAnd128Elsewhere) {
  AttentionQuery q = gpt2();
  for (std::int64_t hs : {8, 16, 40, 64, 96, 128, 200, 256}) {
    q.head_size = hs;
    EXPECT_EQ(cudnn_attention_refusal(q, &kH100), "") << "hs=" << hs;
  }
  for (std::int64_t hs : {0, 4, 12, 20, 65, 264, 512}) {
    q.head_size = hs;
    const std::string why = cudnn_attention_refusal(q, nullptr);
    EXPECT_TRUE(contains(why, cat("head size ", hs))) << why;
    EXPECT_TRUE(contains(why, "model.n_embd / model.n_head")) << why;
  }
  const CudnnRuntime a100{80, 91900, true}, b200{100, 91900, true};
  q.head_size = 128;
  EXPECT_EQ(cudnn_attention_refusal(q, &a100), "");
  EXPECT_EQ(cudnn_attention_refusal(q, &b200), "");
  q.head_size = 256;
  EXPECT_EQ(cudnn_attention_refusal(q, nullptr), "") << "the configuration alone allows up to 256";
  EXPECT_TRUE(contains(cudnn_attention_refusal(q, &a100), "above 128"));
  EXPECT_TRUE(contains(cudnn_attention_refusal(q, &b200), "above 128"));
}

TEST(CudnnAttentionSupport, OldGpusAndKnownBadCudnnVersionsAreRefused) {
  EXPECT_TRUE(contains(cudnn_runtime_refusal({75, 91900, true}), "compute capability 7.5"));
  EXPECT_TRUE(contains(cudnn_runtime_refusal({90, 91000, true}), "9.10.0"));
  EXPECT_TRUE(contains(cudnn_runtime_refusal({90, 91001, true}), "9.10.1"));
  EXPECT_TRUE(contains(cudnn_runtime_refusal({90, 80907, true}), "older than 9.0"));
  EXPECT_EQ(cudnn_runtime_refusal({90, 91002, true}), "");
  EXPECT_EQ(cudnn_runtime_refusal(kH100), "");
  const CudnnRuntime turing{75, 91900, true};
  EXPECT_TRUE(contains(cudnn_attention_refusal(gpt2(), &turing), "compute capability 7.5"));
}

// cuDNN up to 9.15.0 needs the key length to be a multiple of 128 in the backward (cudnn-frontend adds
// a padding mask as a workaround there); newer ones take any length.
TEST(CudnnAttentionSupport, OddLengthsNeedACudnnNewerThan9_15) {
  AttentionQuery q = gpt2();
  const CudnnRuntime old_cudnn{90, 91500, true}, newer{90, 91600, true};
  for (std::int64_t T : {97, 1000, 1025}) {
    q.seq_len = T;
    EXPECT_TRUE(contains(cudnn_attention_refusal(q, &old_cudnn), cat("seq_len ", T))) << T;
    EXPECT_EQ(cudnn_attention_refusal(q, &newer), "") << T;
  }
  q.seq_len = 2048;
  EXPECT_EQ(cudnn_attention_refusal(q, &old_cudnn), "");
  q.seq_len = 0;  // not known yet (start-up)
  EXPECT_EQ(cudnn_attention_refusal(q, &old_cudnn), "");
  q.seq_len = 1;
  EXPECT_TRUE(contains(cudnn_attention_refusal(q, nullptr), "seq_len 1"));
}

TEST(CudnnAttentionSupport, DeterministicBlackwellBackwardNeedsCudnn9_18) {
  const CudnnRuntime det{100, 91700, true}, fast{100, 91700, false}, recent{100, 91800, true};
  EXPECT_TRUE(contains(cudnn_attention_refusal(gpt2(), &det), "deterministic"));
  EXPECT_EQ(cudnn_attention_refusal(gpt2(), &fast), "");
  EXPECT_EQ(cudnn_attention_refusal(gpt2(), &recent), "");
}

TEST(CudnnAttentionSupport, VersionsPrintAsMajorMinorPatch) {
  EXPECT_EQ(cudnn_version_string(91900), "9.19.0");
  EXPECT_EQ(cudnn_version_string(91002), "9.10.2");
  EXPECT_EQ(cudnn_version_string(90100), "9.1.0");
}

// The start-up line says what runs and, where it is not cuDNN under auto, why.
TEST(CudnnAttentionSupport, TheStartUpChoiceNamesTheImplementationAndWhy) {
  EXPECT_EQ(attention_choice(AttentionImpl::kAuto, gpt2(), kH100, ""), "cuDNN 9.19.0 fused SDPA (train.attention=auto)");
  EXPECT_EQ(attention_choice(AttentionImpl::kCudnn, gpt2(), kH100, ""),
            "cuDNN 9.19.0 fused SDPA (train.attention=cudnn)");
  EXPECT_EQ(attention_choice(AttentionImpl::kNative, gpt2(), kH100, ""), "native kernels (train.attention=native)");
  AttentionQuery masked = gpt2();
  masked.document_mask = true;
  const std::string why = attention_choice(AttentionImpl::kAuto, masked, kH100, "");
  EXPECT_TRUE(contains(why, "native kernels (train.attention=auto: a document mask (data.document_mask=true")) << why;
  EXPECT_EQ(attention_choice(AttentionImpl::kAuto, gpt2(), kH100, "this ztrain was built without cuDNN"),
            "native kernels (train.attention=auto: this ztrain was built without cuDNN)");
}

TEST(CudnnAttentionSupport, ImplementationNamesAreTheOptionValues) {
  EXPECT_STREQ(attention_impl_name(AttentionImpl::kAuto), "auto");
  EXPECT_STREQ(attention_impl_name(AttentionImpl::kCudnn), "cudnn");
  EXPECT_STREQ(attention_impl_name(AttentionImpl::kNative), "native");
}

// The CUDA attention over a KV cache keeps each query's split partials in a scratch bounded by the
// budget, taking the queries in groups: a prefill of 4 rows of 8192 tokens of Llama 3.1 8B's 32 heads
// (128 wide) would need 17 GiB of partials at once (4 x 8192 x 32 x 32 splits x 130 floats).
TEST(CachedAttentionScratch, IsBoundedByTheBudgetWhateverTheQueries) {
  const std::int64_t llama_prefill = 4 * 8192 * 32;
  const std::uint64_t per_query = 32 * 130 * sizeof(float);
  EXPECT_GT(static_cast<std::uint64_t>(llama_prefill) * per_query, 16ull << 30);
  EXPECT_LE(cached_attention_scratch_bytes(llama_prefill, 8192, 128), kCachedAttentionScratchBudget);
  EXPECT_EQ(cached_attention_group(llama_prefill, 8192, 128),
            static_cast<std::int64_t>(kCachedAttentionScratchBudget / per_query));
  // Few queries (decoding at batch 1) take what they need, in one group.
  EXPECT_EQ(cached_attention_group(32, 8192, 128), 32);
  EXPECT_EQ(cached_attention_scratch_bytes(32, 8192, 128), 32 * per_query);
  EXPECT_EQ(cached_attention_scratch_bytes(0, 8192, 128), 0u);
  // A cache so long that one query's partials pass the budget still runs, a query at a time.
  const std::int64_t huge = 1ll << 30;
  EXPECT_EQ(cached_attention_group(1000, huge, 128), 1);
  EXPECT_GT(cached_attention_scratch_bytes(1000, huge, 128), kCachedAttentionScratchBudget);
}

}  // namespace

namespace cuda {
namespace {

struct FakePlan {
  int id;
};

SdpaKey key(SdpaKey::Pass pass, std::int64_t B, std::int64_t T) {
  SdpaKey k;
  k.pass = pass, k.dtype = DType::kBF16, k.B = B, k.T = T, k.NH = 12, k.NKV = 12, k.hs = 64;
  return k;
}

TEST(SdpaPlanCache, BuildsOncePerShapeAndReturnsTheSamePlanAfter) {
  SdpaPlanCache<FakePlan> cache;
  int builds = 0;
  auto build = [&] { return std::make_unique<FakePlan>(FakePlan{++builds}); };
  const SdpaKey fwd = key(SdpaKey::Pass::kForward, 16, 1024);
  const auto first = cache.get(fwd, build);
  EXPECT_TRUE(first.built_now);
  ASSERT_NE(first.entry.plan, nullptr);
  const FakePlan* plan = first.entry.plan.get();
  for (int i = 0; i < 3; ++i) {
    const auto again = cache.get(fwd, build);
    EXPECT_FALSE(again.built_now);
    EXPECT_EQ(again.entry.plan.get(), plan) << "the cached plan, not a rebuilt one";
  }
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(cache.builds(), 1u);
}

// Every field of the key selects its own plan: pass, dtype, B, T, heads, K/V heads, head size, and the
// backward's algorithm.
TEST(SdpaPlanCache, EveryKeyFieldSelectsItsOwnPlan) {
  SdpaPlanCache<FakePlan> cache;
  int builds = 0;
  auto build = [&] { return std::make_unique<FakePlan>(FakePlan{++builds}); };
  const SdpaKey base = key(SdpaKey::Pass::kBackward, 16, 1024);
  std::vector<SdpaKey> keys(8, base);
  keys[1].pass = SdpaKey::Pass::kForward;
  keys[2].dtype = DType::kF16;
  keys[3].B = 8;
  keys[4].T = 97;
  keys[5].NH = 24;
  keys[6].NKV = 4;
  keys[7].hs = 128;
  SdpaKey nondet = base;
  nondet.deterministic = false;
  keys.push_back(nondet);
  for (const SdpaKey& k : keys) EXPECT_TRUE(cache.get(k, build).built_now) << describe(k);
  EXPECT_EQ(cache.size(), keys.size());
  for (const SdpaKey& k : keys) EXPECT_FALSE(cache.get(k, build).built_now) << describe(k);
  EXPECT_EQ(builds, static_cast<int>(keys.size()));
}

// A shape cuDNN refuses is tried once: later calls get the refusal without building again.
TEST(SdpaPlanCache, ARefusedShapeIsRememberedWithItsReason) {
  SdpaPlanCache<FakePlan> cache;
  int attempts = 0;
  auto refuse = [&]() -> std::unique_ptr<FakePlan> {
    ++attempts;
    throw Error("cuDNN: none of the heuristics' 0 engine configs runs this graph");
  };
  const SdpaKey k = key(SdpaKey::Pass::kBackward, 2, 97);
  const auto first = cache.get(k, refuse);
  EXPECT_TRUE(first.built_now);
  EXPECT_EQ(first.entry.plan, nullptr);
  EXPECT_TRUE(contains(first.entry.refusal, "engine configs"));
  const auto again = cache.get(k, refuse);
  EXPECT_FALSE(again.built_now);
  EXPECT_EQ(again.entry.plan, nullptr);
  EXPECT_EQ(attempts, 1);
}

// A plan that builds but fails on its first execution becomes a refusal (the native kernels run the
// shape from then on, not rebuilt); once a plan has run, a failure is not the shape's and is not cached.
TEST(SdpaPlanCache, APlanThatFailsOnItsFirstRunIsRefusedAfter) {
  SdpaPlanCache<FakePlan> cache;
  int builds = 0;
  auto build = [&] { return std::make_unique<FakePlan>(FakePlan{++builds}); };
  const SdpaKey fails = key(SdpaKey::Pass::kBackward, 4, 256), runs = key(SdpaKey::Pass::kForward, 4, 256);
  ASSERT_NE(cache.get(fails, build).entry.plan, nullptr);
  EXPECT_TRUE(cache.refuse_if_never_ran(fails, "cuDNN: cudnnBackendExecute failed: CUDNN_STATUS_EXECUTION_FAILED"));
  const auto after = cache.get(fails, build);
  EXPECT_FALSE(after.built_now);
  EXPECT_EQ(after.entry.plan, nullptr);
  EXPECT_TRUE(contains(after.entry.refusal, "EXECUTION_FAILED"));
  ASSERT_NE(cache.get(runs, build).entry.plan, nullptr);
  cache.mark_ran(runs);
  EXPECT_FALSE(cache.refuse_if_never_ran(runs, "a later failure"));
  EXPECT_NE(cache.get(runs, build).entry.plan, nullptr) << "a plan that has run stays";
  EXPECT_EQ(builds, 2);
}

// Not a refusal: an exception other than zt::Error (out of host memory, a bug) propagates and nothing
// is cached, so the next call tries again.
TEST(SdpaPlanCache, OtherFailuresPropagateAndAreNotCached) {
  SdpaPlanCache<FakePlan> cache;
  const SdpaKey k = key(SdpaKey::Pass::kForward, 1, 128);
  EXPECT_THROW(cache.get(k, []() -> std::unique_ptr<FakePlan> { throw std::runtime_error("boom"); }),
               std::runtime_error);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_TRUE(cache.get(k, [] { return std::make_unique<FakePlan>(FakePlan{7}); }).built_now);
}

TEST(SdpaPlanCache, KeysDescribeThemselvesForLogs) {
  SdpaKey k = key(SdpaKey::Pass::kBackward, 16, 1024);
  EXPECT_EQ(describe(k), "backward bf16 B=16 T=1024 NH=12 NKV=12 hs=64");
  k.deterministic = false;
  EXPECT_EQ(describe(k), "backward bf16 B=16 T=1024 NH=12 NKV=12 hs=64 (non-deterministic)");
  k.pass = SdpaKey::Pass::kForward;
  EXPECT_EQ(describe(k), "forward bf16 B=16 T=1024 NH=12 NKV=12 hs=64");
}

}  // namespace
}  // namespace cuda
}  // namespace zt::backend
