// What a model costs (model/cost.hpp): the terms come from the family's descriptor, so a shape the
// family changes (Qwen3's head_dim, its q/k norms) changes every reader at once.
#include <gtest/gtest.h>

#include "backend/backend.hpp"
#include "layers/chunked_lm_loss.hpp"
#include "model/cost.hpp"
#include "model/family.hpp"
#include "model/param_table.hpp"

namespace zt::model {
namespace {

const GptShape kGpt2Small = GptShape::make(12, 12, 768, 50257, 1024);

GptShape qwen3_like() {  // 16 heads of 128 over a hidden size of 1024 (Qwen3-0.6B's attention), 2 blocks
  GptShape s = GptShape::make_llama(2, 16, 1024, 1000, 64, 8, 3072, true, 1e-6, {});
  s.head_dim = 128, s.qk_norm = true;
  return s;
}

// MFU's FLOPs a token: 6 N + 12 L C T (GPT-2 124M: N = 124,439,808 - 786,432 for the position table);
// a LoRA run counts 4 N for its frozen base and 6 x its adapters.
TEST(Cost, MfuFlopsPerTokenOfFullTrainingAndOfLora) {
  const std::uint64_t n = 124439808 - 1024 * 768;
  EXPECT_EQ(ParamTable(kGpt2Small).n_params_for_flops(), n);
  const double attention = 12.0 * 12 * 768 * 1024;
  EXPECT_DOUBLE_EQ(mfu_flops_per_token(kGpt2Small, n), 6.0 * static_cast<double>(n) + attention);
  EXPECT_DOUBLE_EQ(mfu_flops_per_token(kGpt2Small, n, 294912), 4.0 * static_cast<double>(n) + 6.0 * 294912 + attention);
}

// The attention's width is the heads' (16 x 128 = 2048), not the hidden size (1024), wherever FLOPs are
// counted; recomputation adds the forward's third.
TEST(Cost, AttentionFlopsUseTheHeadsWidth) {
  const GptShape s = qwen3_like();
  const double attention = 12.0 * 2048 * 64;
  const TokenFlops f = token_flops(s);
  EXPECT_DOUBLE_EQ(f.attention, attention);
  EXPECT_DOUBLE_EQ(f.block, 6 * f.block_params + attention);
  EXPECT_DOUBLE_EQ(token_flops(s, Recompute::kSelective).block, f.block + attention / 3);
  EXPECT_DOUBLE_EQ(token_flops(s, Recompute::kFull).block, f.block + 2 * f.block_params + attention / 3);
  EXPECT_DOUBLE_EQ(mfu_flops_per_token(s, 1000), 6000 + 2 * attention);
}

// A block's matmuls, each once, with the parallel kind Megatron gives it.
TEST(Cost, BlockMatmulsOfEachFamily) {
  const auto gpt2 = family_of(Arch::kGpt2).block_matmuls(kGpt2Small);
  ASSERT_EQ(gpt2.size(), 4u);
  EXPECT_EQ(gpt2[0].out, 3 * 768);
  EXPECT_TRUE(gpt2[0].column_parallel);
  EXPECT_FALSE(gpt2[1].column_parallel);
  EXPECT_EQ(gpt2[2].out, 4 * 768);
  EXPECT_EQ(gpt2[3].in, 4 * 768);
  const GptShape s = qwen3_like();
  const auto llama = family_of(Arch::kLlama).block_matmuls(s);
  ASSERT_EQ(llama.size(), 4u);  // q|k|v, o, gate|up, down
  EXPECT_EQ(llama[0].out, s.qkv_width());
  EXPECT_EQ(llama[1].in, 2048);
  EXPECT_EQ(llama[2].out, 2 * 3072);
  EXPECT_EQ(llama[3].in, 3072);
  EXPECT_FALSE(llama[3].column_parallel);
}

// The TP traffic's per-head replicated gradients: Qwen3's q_norm and k_norm (2 x 128 floats a block),
// nothing for a model without them.
TEST(Cost, TpCommCountsPerHeadNormGradients) {
  GptShape s = qwen3_like();
  const TpCommBytes with = tp_comm_bytes(s, 1, 2, false);
  s.qk_norm = false;
  const TpCommBytes without = tp_comm_bytes(s, 1, 2, false);
  EXPECT_EQ(with.all_reduce - without.all_reduce, 4u * 2 * 2 * 128);
  EXPECT_EQ(tp_comm_bytes(s, 1, 1, false).all_reduce, 0u);
}

// The CPU workspace of a 16-bit step is the backend's figure over the family's matmuls as a TP rank
// runs them (column-parallel outputs and row-parallel inputs cut by tp) and the head's chunk.
TEST(Cost, CpuWorkspaceReadsTheRanksMatmuls) {
  const GptShape s = qwen3_like();
  const int tp = 2, B = 2, threads = 2;
  const std::int64_t N = B * s.seq_len, C = s.n_embd, F = s.ffn_hidden, W = s.qkv_width();
  const std::int64_t head = layers::loss_chunk_columns(s.padded_vocab / tp, 0);  // 1024 of 1024 rows a rank
  const backend::GemmExtent gemms[] = {{C, W / tp}, {2048 / tp, C}, {C, 2 * F / tp}, {F / tp, C}, {C, head}};
  EXPECT_EQ(cpu_workspace_bytes(s, B, tp, threads, DType::kBF16, 0),
            backend::cpu_workspace_bytes(threads, s.seq_len, DType::kBF16, N, 2048, W / tp, gemms, head));
  EXPECT_EQ(cpu_workspace_bytes(s, B, tp, threads, DType::kF32, 0), backend::cpu_workspace_bytes(threads, s.seq_len));
}

}  // namespace
}  // namespace zt::model
