// A value head (GptShape::value_head, PPO's critic): its table is the actor's without the LM head and with
// score.weight [1, C]; its values are the final norm's output times score.weight, so with score.weight set
// to a row of the actor's head they equal that column of the actor's logits; and its backward (weights w
// from set_loss_weights) is the gradient of sum_n w_n v_n, checked against central differences, for GPT-2
// (a tied actor) and Llama (untied), with recomputation.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/backend.hpp"
#include "model/decoder.hpp"
#include "model/safetensors.hpp"
#include "tests/unit/model/far_from_init.hpp"

namespace zt::model {
namespace {

constexpr int kRows = 2;
constexpr std::int64_t kSeq = 7;

GptShape actor_shape(bool llama) {
  return llama ? GptShape::make_llama(2, 4, 16, 61, kSeq, 2, 24, false, 1e-5, RopeParams{10000, false, 1, 1, 4, 8192})
               : GptShape::make(2, 2, 16, 61, kSeq);
}

std::vector<std::int32_t> tokens() {
  std::vector<std::int32_t> t(kRows * kSeq);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int32_t>((i * 7 + 3) % 61);
  return t;
}

// A model on the CPU over host parameters: its forward's values or logits, and its gradients.
struct ModelRun {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(2);
  ParamTable table;
  Decoder model;
  ModelRun(const GptShape& s, Recompute recompute = Recompute::kNone)
      : table(s), model(*be, table, {.micro_batch = kRows, .recompute = recompute}) {}
  backend::Buffer upload(const std::vector<float>& host) {
    backend::Buffer b = be->allocate(host.size() * sizeof(float));
    be->copy_from_host(b.data(), host.data(), b.bytes());
    return b;
  }
  std::vector<float> values(const std::vector<float>& host) {
    backend::Buffer pb = upload(host);
    FlatParams params(table, pb.view(DType::kF32, {static_cast<std::int64_t>(host.size())}));
    const std::vector<std::int32_t> t = tokens();
    model.forward(t.data(), nullptr, params);
    return model.values();
  }
  std::vector<float> gradients(const std::vector<float>& host, const std::vector<float>& w) {
    const auto n = static_cast<std::int64_t>(host.size());
    backend::Buffer pb = upload(host), gb = be->allocate(host.size() * sizeof(float));
    be->fill_zero(gb.view(DType::kF32, {n}));
    FlatParams params(table, pb.view(DType::kF32, {n}));
    FlatGrads grads(table, gb.view(DType::kF32, {n}));
    const std::vector<std::int32_t> t = tokens();
    model.set_loss_weights(w.data());
    model.forward(t.data(), nullptr, params);
    model.backward(params, grads, 1.0f);
    std::vector<float> g(host.size());
    be->copy_to_host(g.data(), gb.data(), gb.bytes());
    return g;
  }
};

class ValueHead : public ::testing::TestWithParam<bool> {};

TEST_P(ValueHead, TableIsTheActorsWithScoreInPlaceOfTheLmHead) {
  const GptShape actor = actor_shape(GetParam());
  const ParamTable a(actor), c(value_model_shape(actor));
  const int last = actor.n_layer + 1;
  EXPECT_FALSE(c.shape().tie_embeddings);
  const ParamInfo& score = c.params().back();
  EXPECT_EQ(score.name, kValueHeadName);
  EXPECT_EQ(score.shape, (std::vector<std::int64_t>{1, actor.n_embd}));
  EXPECT_EQ(score.unit, last);
  EXPECT_TRUE(score.decay);
  EXPECT_EQ(c.find_or_null("lm_head.weight"), nullptr);
  for (const ParamInfo& p : a.params()) {
    if (p.name == "lm_head.weight") continue;
    const ParamInfo* q = c.find_or_null(p.name);
    ASSERT_NE(q, nullptr) << p.name;
    EXPECT_EQ(q->shape, p.shape) << p.name;
    EXPECT_EQ(q->unit, p.unit) << p.name;
  }
  EXPECT_EQ(c.n_units(), a.n_units());
  EXPECT_EQ(c.numel(), a.numel() - (a.find_or_null("lm_head.weight") ? a.find("lm_head.weight").numel : 0) + actor.n_embd);
}

// The critic's body = the actor's; score.weight = row k of the actor's head: values = logits[:, k].
TEST_P(ValueHead, ValuesAreTheFinalNormTimesScore) {
  const GptShape actor = actor_shape(GetParam());
  ModelRun a(actor), c(value_model_shape(actor));
  const std::vector<float> actor_params = testing::far_from_init(a.table, 5);
  std::vector<float> critic_params(c.table.numel());
  for (const ParamInfo& p : c.table.params())
    if (p.name != kValueHeadName)
      std::copy_n(actor_params.begin() + static_cast<std::ptrdiff_t>(a.table.find(p.name).offset), p.numel,
                  critic_params.begin() + static_cast<std::ptrdiff_t>(p.offset));
  const int k = 17;
  const ParamInfo& head = a.table.find(actor.tie_embeddings ? a.table.params()[0].name : "lm_head.weight");
  std::copy_n(actor_params.begin() + static_cast<std::ptrdiff_t>(head.offset + k * actor.n_embd), actor.n_embd,
              critic_params.begin() + static_cast<std::ptrdiff_t>(c.table.find(kValueHeadName).offset));

  backend::Buffer pb = a.upload(actor_params);
  FlatParams params(a.table, pb.view(DType::kF32, {static_cast<std::int64_t>(actor_params.size())}));
  const std::vector<std::int32_t> t = tokens();
  const std::vector<float> logits = a.model.forward_logits(t.data(), params);
  const std::vector<float> values = c.values(critic_params);
  ASSERT_EQ(values.size(), std::size_t(kRows * kSeq));
  for (std::size_t n = 0; n < values.size(); ++n)
    EXPECT_NEAR(values[n], logits[n * static_cast<std::size_t>(actor.vocab_size) + k], 1e-5f * (1 + std::abs(values[n])))
        << "token " << n;
}

TEST_P(ValueHead, BackwardIsTheGradientOfTheWeightedValues) {
  const GptShape critic = value_model_shape(actor_shape(GetParam()));
  for (const Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
    ModelRun run(critic, recompute);
    const std::vector<float> host = testing::far_from_init(run.table, 7);
    std::vector<float> w(kRows * kSeq);
    for (std::size_t n = 0; n < w.size(); ++n) w[n] = 0.3f * static_cast<float>(static_cast<int>(n % 5) - 2) + 0.1f;
    const std::vector<float> g = run.gradients(host, w);
    auto objective = [&](const std::vector<float>& p) {
      const std::vector<float> v = run.values(p);
      double sum = 0;
      for (std::size_t n = 0; n < v.size(); ++n) sum += double{w[n]} * v[n];
      return sum;
    };
    const float h = 2e-3f;
    int checked = 0;
    for (std::size_t i = 1; i < host.size(); i += host.size() / 89 + 1) {
      std::vector<float> plus = host, minus = host;
      plus[i] += h, minus[i] -= h;
      const double fd = (objective(plus) - objective(minus)) / (2.0 * h);
      EXPECT_NEAR(g[i], fd, 2e-3 * std::max(1.0, std::abs(fd)) + 1e-5) << "parameter " << i;
      checked += std::abs(fd) > 1e-6 ? 1 : 0;
    }
    const std::size_t score = run.table.find(kValueHeadName).offset;
    for (std::size_t i = score; i < score + 3; ++i) {  // the head's own gradient
      std::vector<float> plus = host, minus = host;
      plus[i] += h, minus[i] -= h;
      EXPECT_NEAR(g[i], (objective(plus) - objective(minus)) / (2.0 * h), 2e-3 * std::max(1.0f, std::abs(g[i])));
    }
    EXPECT_GT(checked, 20) << "too few parameters with a gradient to compare";
  }
}

TEST_P(ValueHead, BackwardWithoutWeightsAndLogitsAreRefused) {
  ModelRun run(value_model_shape(actor_shape(GetParam())));
  const std::vector<float> host = testing::far_from_init(run.table, 7);
  backend::Buffer pb = run.upload(host), gb = run.upload(std::vector<float>(host.size()));
  const auto n = static_cast<std::int64_t>(host.size());
  FlatParams params(run.table, pb.view(DType::kF32, {n}));
  FlatGrads grads(run.table, gb.view(DType::kF32, {n}));
  const std::vector<std::int32_t> t = tokens();
  run.model.forward(t.data(), nullptr, params);
  EXPECT_THROW(run.model.backward(params, grads, 1.0f), Error);
  EXPECT_THROW(run.model.forward_logits(t.data(), params), Error);
}

// A critic exports as its family's transformers sequence-classification model with one label (TRL's value
// model); the actor as its causal LM; a Qwen2 critic (q, k, v biases) as Qwen2's.
TEST(ValueHeadConfig, NamesTheFamilysSequenceClassificationModel) {
  const auto arch = [](const GptShape& s) {
    const std::string text = hf_config_json(s);
    const std::size_t at = text.find("\"architectures\"");
    return text.substr(at, text.find(']', at) - at);
  };
  for (const bool llama : {false, true}) {
    const GptShape actor = actor_shape(llama);
    EXPECT_NE(arch(actor).find(llama ? "LlamaForCausalLM" : "GPT2LMHeadModel"), std::string::npos) << arch(actor);
    EXPECT_NE(arch(value_model_shape(actor)).find(llama ? "LlamaForSequenceClassification" : "GPT2ForSequenceClassification"),
              std::string::npos)
        << arch(value_model_shape(actor));
  }
  GptShape qwen2 = actor_shape(true);
  qwen2.qkv_bias = true;
  EXPECT_NE(arch(value_model_shape(qwen2)).find("Qwen2ForSequenceClassification"), std::string::npos)
      << arch(value_model_shape(qwen2));
  EXPECT_NE(hf_config_json(value_model_shape(qwen2)).find("\"LABEL_0\""), std::string::npos) << "one label";
  // Qwen2Config reads head_dim only when given: written when the heads are not n_embd / n_head wide.
  EXPECT_EQ(hf_config_json(qwen2).find("\"head_dim\""), std::string::npos);
  qwen2.head_dim = qwen2.n_embd / qwen2.n_head / 2;
  EXPECT_NE(hf_config_json(qwen2).find(cat("\"head_dim\": ", qwen2.head_dim)), std::string::npos) << hf_config_json(qwen2);
}

INSTANTIATE_TEST_SUITE_P(Families, ValueHead, ::testing::Bool(),
                         [](const auto& info) { return std::string(info.param ? "llama" : "gpt2"); });

}  // namespace
}  // namespace zt::model
