// GPT-2 initialisation: the right std per tensor, constants for biases and LayerNorm, zero padded rows,
// and values that depend only on the seed (any slice of the buffer gets what the whole would).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/init.hpp"

namespace zt::model {
namespace {

TEST(Init, EachTensorHasGpt2sDistribution) {
  const ParamTable t(GptShape::make(4, 4, 64, 500, 32));
  std::vector<float> w(t.numel(), -7.0f);
  init_params(t, 1234, w.data());
  for (const ParamInfo& p : t.params()) {
    double sum = 0, sq = 0;
    for (std::size_t i = 0; i < p.hf_numel(); ++i) {
      sum += w[p.offset + i];
      sq += double(w[p.offset + i]) * w[p.offset + i];
    }
    const double n = double(p.hf_numel()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    if (p.name.ends_with("c_proj.weight")) {
      EXPECT_NEAR(sd, 0.02 / std::sqrt(8.0), 0.1 * 0.02 / std::sqrt(8.0)) << p.name;
    } else if (p.decay) {
      EXPECT_NEAR(sd, 0.02, 0.002) << p.name;
      EXPECT_NEAR(mean, 0.0, 0.002) << p.name;
    } else {
      const float want = p.name.find(".ln_") != std::string::npos && p.name.ends_with(".weight") ? 1.0f : 0.0f;
      for (std::size_t i = 0; i < p.numel; ++i) ASSERT_EQ(w[p.offset + i], want) << p.name;
    }
  }
  const ParamInfo& wte = t.find("transformer.wte.weight");
  for (std::size_t i = wte.hf_numel(); i < wte.numel; ++i) ASSERT_EQ(w[wte.offset + i], 0.0f) << "padded row";
}

TEST(Init, AnySliceGetsTheValuesOfTheWhole) {
  const ParamTable t(GptShape::make(2, 3, 24, 61, 8));
  std::vector<float> whole(t.numel());
  init_params(t, 99, whole.data());
  for (std::size_t first : {std::size_t{0}, std::size_t{1}, std::size_t{1461}, t.numel() / 3}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{777}, t.numel() - first}) {
      if (first + count > t.numel()) continue;
      std::vector<float> part(count);
      init_params_range(t, 99, first, count, part.data());
      for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(part[i], whole[first + i]) << first << "+" << i;
    }
  }
}

TEST(Init, TheSeedDecides) {
  const ParamTable t(GptShape::make(1, 1, 8, 10, 4));
  std::vector<float> a(t.numel()), b(t.numel()), c(t.numel());
  init_params(t, 5, a.data());
  init_params(t, 5, b.data());
  init_params(t, 6, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace zt::model
