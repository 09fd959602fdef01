// Generation over a KV cache (Model::forward_cached) against the full forward: for GPT-2, Llama with
// grouped-query and multi-query attention, Qwen2's q, k, v biases and Qwen3's head norms (a head width
// other than C/NH), two sequences in different cache slots, each fed token by token after a prompt
// prefilled in padded chunks, interleaved in one decoding batch at different positions. Every position's
// logits equal the full forward's row within fp32 rounding (bf16: within its rounding).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "model/decoder.hpp"
#include "model/kv_cache.hpp"
#include "tests/unit/model/far_from_init.hpp"

namespace zt::model {
namespace {

constexpr int kT = 13, kV = 61;

struct Case {
  std::string name;
  GptShape shape;
  DType dtype = DType::kF32;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

GptShape llama(int n_kv_head, bool tied) {
  RopeParams rope{10000, true, 4, 1, 4, 4};  // llama3 scaling with a short original context: all three bands
  return GptShape::make_llama(2, 4, 32, kV, kT, n_kv_head, 40, tied, 1e-5, rope);
}

std::vector<Case> cases() {
  GptShape qwen2 = llama(2, false), qwen3 = llama(2, true);
  qwen2.qkv_bias = true;
  qwen3.qk_norm = true, qwen3.head_dim = 12;
  std::vector<Case> all = {{"gpt2", GptShape::make(2, 4, 32, kV, kT)},
                           {"llama_gqa", llama(2, false)},
                           {"llama_mqa_tied", llama(1, true)},
                           {"qwen2_biases", qwen2},
                           {"qwen3_head_norms", qwen3}};
  for (Case c : {all[0], all[1], all[4]}) {
    c.name += "_bf16", c.dtype = DType::kBF16;
    all.push_back(c);
  }
  return all;
}

class KvCacheVsFullForward : public ::testing::TestWithParam<Case> {};

TEST_P(KvCacheVsFullForward, EveryPositionsLogitsEqualTheFullForwards) {
  const Case& c = GetParam();
  auto be = backend::make_cpu_backend(2);
  const ParamTable table(c.shape);
  const std::vector<float> host = testing::far_from_init(table, 7);
  const auto n = static_cast<std::int64_t>(table.numel());
  backend::Buffer f32 = be->allocate(host.size() * sizeof(float)), flat = be->allocate(host.size() * dtype_size(c.dtype));
  be->copy_from_host(f32.data(), host.data(), f32.bytes());
  be->cast(flat.view(c.dtype, {n}), f32.view(DType::kF32, {n}));
  FlatParams params(table, flat.view(c.dtype, {n}));

  // Two sequences of kT tokens; the full forward's logits [2*kT, V].
  std::vector<std::int32_t> tokens(2 * kT);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 37 + 11) % kV);
  Decoder full(*be, table, {.micro_batch = 2, .compute = c.dtype});
  const std::vector<float> want = full.forward_logits(tokens.data(), params);

  // Sequence 0 in slot 2 with a 7-token prompt, sequence 1 in slot 0 with a 3-token one; prefill in
  // chunks of 4 (the last padded), then decoding steps of both at once.
  KvCache cache(*be, c.shape, 1, c.dtype, 3, kT);
  const int chunk = 4, slot[2] = {2, 0}, prompt[2] = {7, 3};
  Decoder prefill(*be, table, {.micro_batch = 1, .recompute = Recompute::kFull, .compute = c.dtype, .generation = true,
                               .tokens_per_row = chunk});
  Decoder decode(*be, table, {.micro_batch = 2, .recompute = Recompute::kFull, .compute = c.dtype, .generation = true,
                              .tokens_per_row = 1});
  std::vector<float> got(want.size(), std::nanf(""));
  auto keep = [&](const std::vector<float>& logits, std::size_t k, int seq, int pos) {
    std::copy_n(logits.begin() + static_cast<std::ptrdiff_t>(k * kV), kV, got.begin() + (seq * kT + pos) * kV);
  };
  for (int s = 0; s < 2; ++s)
    for (int p0 = 0; p0 < prompt[s]; p0 += chunk) {
      std::vector<std::int32_t> tok(chunk, 0), pos(chunk, -1);
      CachedBatch batch{.slots = &slot[s]};
      for (int t = 0; t < chunk && p0 + t < prompt[s]; ++t) {
        tok[t] = tokens[s * kT + p0 + t], pos[t] = p0 + t;
        batch.logit_rows.push_back(t);
      }
      batch.tokens = tok.data(), batch.positions = pos.data();
      const std::vector<float> logits = prefill.forward_cached(batch, cache, params);
      for (std::size_t k = 0; k < batch.logit_rows.size(); ++k) keep(logits, k, s, p0 + static_cast<int>(k));
    }
  // Decoding: sequence 0 at positions 7.., sequence 1 at 3..; once 0 has finished, 1 decodes alone in
  // row 1 (row 0 padding) so a padding row's neighbour is checked too.
  for (int step = 0; 3 + step < kT; ++step) {
    const int p0 = 7 + step, p1 = 3 + step;
    std::int32_t tok[2] = {p0 < kT ? tokens[p0] : 0, tokens[kT + p1]}, pos[2] = {p0 < kT ? p0 : -1, p1};
    CachedBatch batch{.tokens = tok, .positions = pos, .slots = slot};
    if (p0 < kT) batch.logit_rows.push_back(0);
    batch.logit_rows.push_back(1);
    const std::vector<float> logits = decode.forward_cached(batch, cache, params);
    if (p0 < kT) keep(logits, 0, 0, p0);
    keep(logits, p0 < kT ? 1 : 0, 1, p1);
  }
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "position " << i / kV << " never computed";
    worst = std::max(worst, std::abs(double(got[i]) - want[i]));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  EXPECT_LT(worst, (c.dtype == DType::kF32 ? 2e-5 : 3e-2) * scale) << "largest logit " << scale;
}

INSTANTIATE_TEST_SUITE_P(Families, KvCacheVsFullForward, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(KvCache, SizesAndRefusals) {
  const GptShape s = llama(2, false);  // 2 blocks, 2 K/V heads of 8
  EXPECT_EQ(KvCache::bytes(s, 1, DType::kBF16, 3, 100), std::size_t{2} * 2 * 3 * 100 * 16 * 2);
  EXPECT_EQ(KvCache::bytes(s, 2, DType::kF32, 1, 10), std::size_t{2} * 2 * 1 * 10 * 8 * 4);
  EXPECT_THROW(KvCache::bytes(s, 4, DType::kF32, 1, 10), Error);  // tp 4 does not divide 2 K/V heads
  auto be = backend::make_cpu_backend(1);
  const ParamTable table(s);
  EXPECT_THROW(Decoder(*be, table, {.micro_batch = 1, .generation = true, .tokens_per_row = 1}), Error);  // no kFull
}

}  // namespace
}  // namespace zt::model
