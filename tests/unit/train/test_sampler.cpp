// Samples continue the prompt with exactly n tokens, deterministically for a seed, and greedy
// (top_k = 1) sampling picks the most likely token.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "backend/backend.hpp"
#include "model/decoder.hpp"
#include "model/init.hpp"
#include "tests/unit/tok/vocab_fixture.hpp"
#include "train/sampler.hpp"

namespace zt::train {
namespace {

struct TinyGpt {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  model::ParamTable table{model::GptShape::make(1, 2, 16, 50257, 16)};
  model::Decoder gpt{*be, table, {.micro_batch = 1}};
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

// A fine-tuned model's vocabulary covers specials above GPT-2's 50257 ids (ztok --special); the sampler
// never draws them (the tokenizer could not write them out). Here every logit is 0 but special 50258's
// (ln_f's output is its bias e_0, and only that wte row has a non-zero first element), so without the
// limit greedy sampling would pick it.
TEST(Sampler, NeverDrawsIdsAboveTheTokenizersVocabulary) {
  ZT_REQUIRE_VOCAB();
  auto be = backend::make_cpu_backend(1);
  model::ParamTable table{model::GptShape::make(1, 2, 16, 50259, 16)};
  model::Decoder gpt{*be, table, {.micro_batch = 1}};
  std::vector<float> host(table.numel());
  model::init_params(table, 7, host.data());
  for (const model::ParamInfo& p : table.params()) {
    if (p.name == "transformer.wte.weight") {
      std::fill_n(host.begin() + static_cast<std::ptrdiff_t>(p.offset), 50259 * 16, 0.0f);
      host[p.offset + 50258 * 16] = 100.0f;
    }
    if (p.name == "transformer.ln_f.weight") std::fill_n(host.begin() + static_cast<std::ptrdiff_t>(p.offset), 16, 0.0f);
    if (p.name == "transformer.ln_f.bias") {
      std::fill_n(host.begin() + static_cast<std::ptrdiff_t>(p.offset), 16, 0.0f);
      host[p.offset] = 1.0f;
    }
  }
  backend::Buffer flat = be->allocate(table.numel() * sizeof(float));
  be->copy_from_host(flat.data(), host.data(), host.size() * sizeof(float));
  model::FlatParams params(table, flat.view(DType::kF32, {static_cast<std::int64_t>(table.numel())}));
  std::vector<std::int32_t> window(16, 0);
  const std::vector<float> logits = gpt.forward_logits(window.data(), params);
  ASSERT_EQ(std::max_element(logits.begin(), logits.begin() + 50259) - logits.begin(), 50258);  // the trap is set
  SampleOptions o;
  o.n_tokens = 3;
  o.top_k = 1;
  std::string text;
  EXPECT_NO_THROW(text = sample_text(gpt, params, *tokenizer, "Hi", o));  // decoding id 50258 would throw
  EXPECT_EQ(text.rfind("Hi", 0), 0u);
  EXPECT_GT(text.size(), 2u);
}

}  // namespace
}  // namespace zt::train
