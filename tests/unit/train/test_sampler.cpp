// Samples continue the prompt with exactly n tokens, deterministically for a seed, and greedy
// (top_k = 1) sampling picks the most likely token.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "backend/backend.hpp"
#include "model/gpt2.hpp"
#include "model/init.hpp"
#include "tests/unit/tok/vocab_fixture.hpp"
#include "train/sampler.hpp"

namespace zt::train {
namespace {

struct TinyGpt {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  model::ParamTable table{model::GptShape::make(1, 2, 16, 50257, 16)};
  model::Gpt2 gpt{*be, table, 1};
  backend::Buffer flat = be->allocate(table.numel() * sizeof(float));
  std::unique_ptr<model::FlatParams> params;
  TinyGpt() {
    std::vector<float> host(table.numel());
    model::init_params(table, 7, host.data());
    be->copy_from_host(flat.data(), host.data(), host.size() * sizeof(float));
    params = std::make_unique<model::FlatParams>(table, flat.view(DType::kF32, {static_cast<std::int64_t>(table.numel())}));
  }
};

TEST(Sampler, ContinuesThePromptDeterministically) {
  ZT_REQUIRE_VOCAB();
  TinyGpt m;
  SampleOptions o;
  o.n_tokens = 20;  // more than seq_len 16: the window slides
  o.seed = 3;
  const std::string a = sample_text(m.gpt, *m.params, *tokenizer, "The President", o);
  const std::string b = sample_text(m.gpt, *m.params, *tokenizer, "The President", o);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.rfind("The President", 0), 0u) << a;
  std::vector<std::uint32_t> ids;
  tok::Encoder(*tokenizer).encode(a, ids);
  EXPECT_GE(ids.size(), 2u + 10u);  // the prompt plus new tokens (re-encoding may merge a few)
  o.seed = 4;
  EXPECT_NE(sample_text(m.gpt, *m.params, *tokenizer, "The President", o), a);
}

TEST(Sampler, TopOneIsGreedy) {
  ZT_REQUIRE_VOCAB();
  TinyGpt m;
  SampleOptions o;
  o.n_tokens = 1;
  o.top_k = 1;
  const std::string text = sample_text(m.gpt, *m.params, *tokenizer, "Hello", o);
  std::vector<std::uint32_t> prompt;
  tok::Encoder(*tokenizer).encode("Hello", prompt);
  std::vector<std::int32_t> window(16, 0);
  std::copy(prompt.begin(), prompt.end(), window.begin());
  const std::vector<float> logits = m.gpt.forward_logits(window.data(), *m.params);
  const float* last = logits.data() + (prompt.size() - 1) * 50257;
  const auto best = static_cast<std::uint32_t>(std::max_element(last, last + 50257) - last);
  const std::uint32_t ids[] = {best};
  EXPECT_EQ(text, "Hello" + tokenizer->decode(ids));
}

}  // namespace
}  // namespace zt::train

#include "train/gpu_monitor.hpp"

namespace zt::train {
namespace {
// Where no NVIDIA driver is loaded (CI), the monitor says why and reads nothing; on a lent GPU it
// reads a plausible board power and temperature.
TEST(GpuMonitor, UnavailableWithoutADriverAndPlausibleWithOne) {
  GpuMonitor m;
  if (!m.open(0)) {
    EXPECT_FALSE(m.available());
    EXPECT_FALSE(m.why_unavailable().empty());
    GTEST_SKIP() << "no NVML here: " << m.why_unavailable();
  }
  const GpuReading r = m.read();
  EXPECT_GT(r.power_w, 10.0);
  EXPECT_LT(r.power_w, 2000.0);
  EXPECT_GT(r.temp_c, 5.0);
  EXPECT_LT(r.temp_c, 110.0);
}
}  // namespace
}  // namespace zt::train
