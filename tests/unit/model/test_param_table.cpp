// The parameter table: HF names in flat order, contiguous offsets, units that partition the buffer,
// decay flags, and GPT-2 small's published parameter count.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "model/checkpoint_desc.hpp"
#include "model/param_table.hpp"

namespace zt::model {
namespace {

TEST(GptShape, PadsTheVocabularyToAMultipleOf64) {
  EXPECT_EQ(GptShape::make(12, 12, 768, 50257, 1024).padded_vocab, 50304);
  EXPECT_EQ(GptShape::make(2, 3, 24, 64, 8).padded_vocab, 64);
  EXPECT_EQ(GptShape::make(2, 3, 24, 61, 8).padded_vocab, 64);
  EXPECT_THROW(GptShape::make(2, 5, 24, 61, 8), ConfigError);  // 24 % 5 != 0
  EXPECT_THROW(GptShape::make(0, 1, 24, 61, 8), ConfigError);
}

TEST(ParamTable, Gpt2SmallHas124439808RealParameters) {
  const ParamTable t(GptShape::make(12, 12, 768, 50257, 1024));
  EXPECT_EQ(t.n_params_real(), 124439808u);
  EXPECT_EQ(t.n_params_for_flops(), 124439808u - 1024u * 768u);
  EXPECT_EQ(t.numel(), 124439808u + (50304u - 50257u) * 768u);
  EXPECT_EQ(t.params().size(), 2u + 12u * 12u + 2u);
  EXPECT_EQ(t.n_units(), 14);
}

TEST(ParamTable, OffsetsAreContiguousAndUnitsPartitionTheBuffer) {
  const ParamTable t(GptShape::make(3, 3, 24, 97, 11));
  std::size_t at = 0;
  for (const ParamInfo& p : t.params()) {
    EXPECT_EQ(p.offset, at) << p.name;
    at += p.numel;
  }
  EXPECT_EQ(at, t.numel());
  at = 0;
  for (int u = 0; u < t.n_units(); ++u) {
    EXPECT_EQ(t.units()[u].offset, at) << "unit " << u;
    std::size_t sum = 0;
    for (std::size_t i = t.first_param(u); i < t.end_param(u); ++i) {
      EXPECT_EQ(t.params()[i].unit, u);
      sum += t.params()[i].numel;
    }
    EXPECT_EQ(sum, t.units()[u].numel);
    at += sum;
  }
  EXPECT_EQ(at, t.numel());
}

TEST(ParamTable, NamesShapesAndDecayFollowHuggingFace) {
  const ParamTable t(GptShape::make(2, 2, 24, 61, 8));
  const ParamInfo& wte = t.find("transformer.wte.weight");
  EXPECT_EQ(wte.shape, (std::vector<std::int64_t>{64, 24}));
  EXPECT_EQ(wte.hf_shape, (std::vector<std::int64_t>{61, 24}));
  EXPECT_TRUE(wte.decay);
  EXPECT_EQ(t.find("transformer.h.1.attn.c_attn.weight").shape, (std::vector<std::int64_t>{24, 72}));
  EXPECT_EQ(t.find("transformer.h.1.mlp.c_proj.weight").shape, (std::vector<std::int64_t>{96, 24}));
  EXPECT_EQ(t.find("transformer.h.0.mlp.c_fc.bias").shape, (std::vector<std::int64_t>{96}));
  EXPECT_FALSE(t.find("transformer.h.0.ln_1.weight").decay);
  EXPECT_FALSE(t.find("transformer.h.0.attn.c_attn.bias").decay);
  EXPECT_TRUE(t.find("transformer.wpe.weight").decay);
  EXPECT_EQ(t.find("transformer.ln_f.bias").unit, 3);
  EXPECT_EQ(t.find("transformer.h.1.ln_2.bias").unit, 2);
  EXPECT_EQ(t.params().front().name, "transformer.wte.weight");
  EXPECT_EQ(t.params().back().name, "transformer.ln_f.bias");
  EXPECT_THROW(t.find("lm_head.weight"), Error);
}

// zckpt info prints the description's hyper-parameters: the Qwen-style keys that change the tensors must be
// there (a Qwen2 and a plain Llama of the same widths otherwise read the same), and only when set.
TEST(ParamTable, DescriptionNamesTheKeysThatChangeTheTensors) {
  const auto keys = [](const GptShape& s) {
    std::string out;
    for (const auto& [k, v] : describe_model(ParamTable(s)).hyper) out += k + "=" + std::to_string(v) + " ";
    return out;
  };
  const GptShape llama = GptShape::make_llama(2, 4, 32, 64, 8, 2, 40, false, 1e-5, RopeParams{});
  GptShape qwen3 = llama;
  qwen3.qkv_bias = true, qwen3.qk_norm = true, qwen3.head_dim = 12;
  EXPECT_EQ(keys(llama).find("qkv_bias"), std::string::npos);
  EXPECT_EQ(keys(llama).find("head_dim"), std::string::npos);
  EXPECT_NE(keys(qwen3).find("qkv_bias=1 qk_norm=1 head_dim=12 "), std::string::npos) << keys(qwen3);
}

}  // namespace
}  // namespace zt::model
