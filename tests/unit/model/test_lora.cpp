// LoRA on the CPU backend: PEFT's tensor names and shapes for both families, PEFT's initialisation from
// the seed (any slice the same), and the adapted model equal to the base model with the adapters merged
// into its weights (merge_lora), for GPT-2 (whole modules) and Llama (q, k, v inside the fused q|k|v GEMM,
// gate, up inside gate|up), in the forward pass and in the input gradients the backward pass leaves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "config/lora.hpp"
#include "tests/unit/model/far_from_init.hpp"
#include "model/family.hpp"
#include "model/lora.hpp"
#include "model/model.hpp"

namespace zt::model {
namespace {

GptShape tiny_gpt2() { return GptShape::make(2, 2, 16, 61, 7); }
GptShape tiny_llama() {
  RopeParams rope{10000, false, 1, 1, 4, 4};
  return GptShape::make_llama(2, 4, 16, 61, 7, 2, 24, false, 1e-5, rope);
}
LoraSpec spec(std::vector<std::string> targets, bool rslora = false) { return {4, 8, rslora, std::move(targets)}; }

// Decayed parameters N(0, std^2), the others N(1, 0.01) (far_from_init.hpp).
std::vector<float> random(const ParamTable& t, std::uint64_t seed, float std) { return testing::far_from_init(t, seed, std); }

TEST(LoraTable, NamesAndShapesArePeftsForBothFamilies) {
  const ParamTable g = lora_table(tiny_gpt2(), spec({"c_attn", "c_proj"}));
  ASSERT_EQ(g.params().size(), 2u * 2 * 3);  // blocks x (c_attn, attn.c_proj, mlp.c_proj) x (A, B)
  EXPECT_EQ(g.params()[0].name, "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
  EXPECT_EQ(g.params()[0].shape, (std::vector<std::int64_t>{4, 16}));
  EXPECT_EQ(g.params()[1].shape, (std::vector<std::int64_t>{48, 4}));  // B [3C, r]
  EXPECT_EQ(g.params()[5].name, "base_model.model.transformer.h.0.mlp.c_proj.lora_B.weight");
  EXPECT_EQ(g.params()[4].shape, (std::vector<std::int64_t>{4, 64}));  // A [r, 4C]
  EXPECT_EQ(g.n_units(), 2);
  const ParamTable l = lora_table(tiny_llama(), spec({"k_proj", "down_proj"}));
  EXPECT_EQ(l.params()[0].name, "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight");
  EXPECT_EQ(l.params()[1].shape, (std::vector<std::int64_t>{8, 4}));   // B [n_kv_head * hs, r]
  EXPECT_EQ(l.params()[2].shape, (std::vector<std::int64_t>{4, 24}));  // down_proj A [r, F]
  EXPECT_EQ(lora_base_weight(l.params()[2].name), "model.layers.0.mlp.down_proj.weight");
}

// lora.targets is checked in config/ (below the model), against the module names config/lora.cpp keeps
// per family; they must be the family descriptor's, in its order, or a valid target would be refused.
TEST(LoraTable, ConfigsModuleNamesAreTheFamilysDescriptor) {
  for (const GptShape& s : {tiny_gpt2(), tiny_llama()}) {
    config::Config c;
    c.model.arch = s.arch;
    c.lora.rank = 4;
    std::vector<std::string> family;
    for (const LoraModule& m : family_of(s.arch).lora_modules(s))
      if (std::find(family.begin(), family.end(), m.name) == family.end()) {
        c.lora.targets += (family.empty() ? "" : ",") + m.name;
        family.push_back(m.name);
      }
    EXPECT_EQ(config::lora_target_modules(c), family) << family_of(s.arch).name;
  }
}

TEST(LoraInit, AIsKaimingUniformBIsZeroAndAnySliceMatches) {
  const ParamTable t = lora_table(tiny_gpt2(), spec({"c_fc", "c_proj"}));
  std::vector<float> all(t.numel()), pieces(t.numel());
  init_lora_range(t, 42, 0, t.numel(), all.data());
  for (std::size_t at = 0; at < t.numel(); at += 37) init_lora_range(t, 42, at, std::min<std::size_t>(37, t.numel() - at), pieces.data() + at);
  EXPECT_EQ(all, pieces);
  for (const ParamInfo& p : t.params()) {
    const auto [lo, hi] = std::minmax_element(all.begin() + p.offset, all.begin() + p.offset + p.numel);
    if (p.name.ends_with("lora_B.weight")) {
      EXPECT_EQ(*lo, 0.0f);
      EXPECT_EQ(*hi, 0.0f);
      continue;
    }
    const float bound = 1.0f / std::sqrt(static_cast<float>(p.shape[1]));
    EXPECT_GE(*lo, -bound);
    EXPECT_LE(*hi, bound);
    EXPECT_GT(*hi - *lo, bound);  // spread over the interval, not a constant
  }
}

// The model with adapters vs the model on merged weights: logits, and the gradient the backward pass
// gives every base weight that is not adapted (the same function of the same inputs).
void expect_lora_equals_merged(const GptShape& shape, const LoraSpec& s) {
  auto be = backend::make_cpu_backend(1);
  const ParamTable base(shape), adapters = lora_table(shape, s);
  const int B = 2;
  const std::vector<float> w = random(base, 3, 0.3f), ab = random(adapters, 5, 0.3f);  // B non-zero
  std::vector<float> merged = w;
  merge_lora(base, merged.data(), adapters, ab.data(), s.scale());
  auto buffer = [&](const std::vector<float>& v) {
    backend::Buffer b = be->allocate(v.size() * sizeof(float));
    be->copy_from_host(b.data(), v.data(), b.bytes());
    return b;
  };
  backend::Buffer wb = buffer(w), mb = buffer(merged), ab_buf = buffer(ab);
  auto flat = [](backend::Buffer& b, std::size_t n) { return b.view(DType::kF32, {static_cast<std::int64_t>(n)}); };
  FlatParams base_params(base, flat(wb, base.numel())), merged_params(base, flat(mb, base.numel()));
  FlatParams adapter_params(adapters, flat(ab_buf, adapters.numel()));
  std::vector<float> zeros(adapters.numel(), 0.0f);
  backend::Buffer agb = buffer(zeros);
  FlatGrads adapter_grads(adapters, flat(agb, adapters.numel()));
  Lora lora(*be, adapters, s, B, DType::kF32);
  lora.bind(&adapter_params, &adapter_grads);
  auto with = make_model(*be, base, {.micro_batch = B}), plain = make_model(*be, base, {.micro_batch = B});
  with->set_lora(&lora);
  std::vector<std::int32_t> tokens, targets;
  for (int i = 0; i < B * shape.seq_len; ++i) tokens.push_back((i * 17 + 5) % 61), targets.push_back((i * 29 + 3) % 61);
  const std::vector<float> a = with->forward_logits(tokens.data(), base_params);
  const std::vector<float> b = plain->forward_logits(tokens.data(), merged_params);
  ASSERT_EQ(a.size(), b.size());
  float worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  EXPECT_LT(worst, 2e-5f) << "logits with adapters vs merged weights";
  // Gradients of the base's norm weights (their inputs run through every adapted matmul's backward).
  std::vector<float> gz(base.numel(), 0.0f);
  backend::Buffer g1 = buffer(gz), g2 = buffer(gz);
  FlatGrads grads_with(base, flat(g1, base.numel())), grads_plain(base, flat(g2, base.numel()));
  with->forward(tokens.data(), targets.data(), base_params);
  with->backward(base_params, grads_with, 1.0f);
  plain->forward(tokens.data(), targets.data(), merged_params);
  plain->backward(merged_params, grads_plain, 1.0f);
  std::vector<float> h1(base.numel()), h2(base.numel());
  be->copy_to_host(h1.data(), g1.data(), g1.bytes());
  be->copy_to_host(h2.data(), g2.data(), g2.bytes());
  float gworst = 0, gmax = 0;
  for (const ParamInfo& p : base.params()) {
    if (p.decay) continue;  // norms and biases: not adapted, their gradients pass through the adapters
    for (std::size_t i = 0; i < p.numel; ++i)
      gworst = std::max(gworst, std::fabs(h1[p.offset + i] - h2[p.offset + i])), gmax = std::max(gmax, std::fabs(h2[p.offset + i]));
  }
  EXPECT_GT(gmax, 1e-3f);
  EXPECT_LT(gworst, 1e-4f * std::max(1.0f, gmax)) << "norm gradients with adapters vs merged weights";
}

TEST(Lora, Gpt2WithAdaptersEqualsTheMergedModel) {
  expect_lora_equals_merged(tiny_gpt2(), spec({"c_attn", "c_proj", "c_fc"}));
}

TEST(Lora, LlamaWithAdaptersInsideTheFusedMatmulsEqualsTheMergedModel) {
  expect_lora_equals_merged(tiny_llama(), spec({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}, true));
  expect_lora_equals_merged(tiny_llama(), spec({"k_proj", "up_proj"}));  // a module alone inside each fused GEMM
}

}  // namespace
}  // namespace zt::model
