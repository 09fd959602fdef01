// train.attention at start-up (train/attention_check.hpp): cudnn where cuDNN's fused attention cannot
// run the model is exit 2 before any work, naming both keys and the fix; auto and native never are.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/error.hpp"
#include "train/attention_check.hpp"

namespace zt::train {
namespace {

config::Config gpt2_bf16(config::Attention attention) {
  config::Config c;
  c.model.n_layer = 12, c.model.n_head = 12, c.model.n_embd = 768, c.model.seq_len = 1024;
  c.train.precision = config::Precision::kBf16;
  c.train.attention = attention;
  return c;
}

// Expects a ConfigError (exit 2) whose message holds every fragment.
void expect_refused(const config::Config& c, config::Device device, const std::vector<std::string>& fragments) {
  try {
    check_attention(c, device);
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    for (const std::string& f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

TEST(AttentionCheck, CudnnAcceptsWhatCudnnRuns) {
  EXPECT_NO_THROW(check_attention(gpt2_bf16(config::Attention::kCudnn), config::Device::kCuda));
  config::Config llama = gpt2_bf16(config::Attention::kCudnn);
  llama.model.arch = config::Arch::kLlama;
  llama.model.n_head = 32, llama.model.n_kv_head = 8, llama.model.n_embd = 2048, llama.model.seq_len = 2048;
  llama.train.precision = config::Precision::kFp16;
  EXPECT_NO_THROW(check_attention(llama, config::Device::kCuda));
}

TEST(AttentionCheck, CudnnWithFp32OrADocumentMaskIsExit2NamingBothKeys) {
  config::Config c = gpt2_bf16(config::Attention::kCudnn);
  c.train.precision = config::Precision::kFp32;
  expect_refused(c, config::Device::kCuda, {"train.attention=cudnn", "train.precision=fp32", "train.attention=auto"});
  c = gpt2_bf16(config::Attention::kCudnn);
  c.data.document_mask = true;
  expect_refused(c, config::Device::kCuda, {"train.attention=cudnn", "data.document_mask=true"});
  // RL's packed rollouts carry a document mask too; one rollout a row does not.
  c = gpt2_bf16(config::Attention::kCudnn);
  c.rl.prompts = "prompts.jsonl";
  expect_refused(c, config::Device::kCuda, {"train.attention=cudnn", "rl.pack_rollouts=true"});
  c.rl.pack_rollouts = false;
  EXPECT_NO_THROW(check_attention(c, config::Device::kCuda));
}

TEST(AttentionCheck, CudnnWithAHeadSizeOutsideCudnnsMatrixIsExit2) {
  config::Config c = gpt2_bf16(config::Attention::kCudnn);
  c.model.n_embd = 240, c.model.n_head = 12;  // hs 20: not a multiple of 8
  expect_refused(c, config::Device::kCuda, {"train.attention=cudnn", "head size 20", "model.n_embd / model.n_head"});
}

TEST(AttentionCheck, CudnnOnTheCpuIsExit2) {
  config::Config c = gpt2_bf16(config::Attention::kCudnn);
  c.train.device = config::Device::kCpu;
  expect_refused(c, config::Device::kCpu, {"train.attention=cudnn", "train.device=cpu", "train.device=cuda"});
}

// auto falls back to the native kernels and native is always possible: nothing to refuse at start-up.
TEST(AttentionCheck, AutoAndNativeAreNeverRefused) {
  for (const auto a : {config::Attention::kAuto, config::Attention::kNative}) {
    config::Config c = gpt2_bf16(a);
    c.train.precision = config::Precision::kFp32;
    c.data.document_mask = true;
    EXPECT_NO_THROW(check_attention(c, config::Device::kCpu));
    EXPECT_NO_THROW(check_attention(c, config::Device::kCuda));
  }
}

TEST(AttentionCheck, TheQueryIsTheModelsAttention) {
  config::Config c = gpt2_bf16(config::Attention::kAuto);
  c.model.n_kv_head = 4;
  c.data.document_mask = true;
  const backend::AttentionQuery q = attention_query(c);
  EXPECT_EQ(q.dtype, DType::kBF16);
  EXPECT_EQ(q.head_size, 64);
  EXPECT_EQ(q.n_head, 12);
  EXPECT_EQ(q.n_kv_head, 4);
  EXPECT_EQ(q.seq_len, 1024);
  EXPECT_TRUE(q.document_mask);
  c.model.n_kv_head = 0;  // 0 = n_head
  EXPECT_EQ(attention_query(c).n_kv_head, 12);
  EXPECT_EQ(attention_impl(config::Attention::kCudnn), backend::AttentionImpl::kCudnn);
  EXPECT_EQ(attention_impl(config::Attention::kNative), backend::AttentionImpl::kNative);
  EXPECT_EQ(attention_impl(config::Attention::kAuto), backend::AttentionImpl::kAuto);
}

}  // namespace
}  // namespace zt::train
