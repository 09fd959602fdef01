// The generation engine on the CPU backend: greedy continuations equal those of the full forward re-run
// for every token (no cache), for GPT-2 and Llama (GQA), with more prompts than slots (continuous
// batching) and prompts longer than a prefill chunk; a seeded sampled run gives the same tokens whatever
// the number of slots; stop tokens, max_new_tokens and the context end sequences with their reasons; a
// prompt that does not fit is refused naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "gen/engine.hpp"
#include "model/model.hpp"
#include "tests/unit/model/far_from_init.hpp"

namespace zt::gen {
namespace {

using model::GptShape;
using model::ParamTable;

constexpr int kT = 24, kV = 61;

GptShape llama() {
  model::RopeParams rope{10000, false, 1, 1, 4, 8192};
  return GptShape::make_llama(2, 4, 32, kV, kT, 2, 40, false, 1e-5, rope);
}

struct Model {
  explicit Model(const GptShape& s) : be(backend::make_cpu_backend(2)), table(s) {
    const std::vector<float> w = model::testing::far_from_init(table, 3, 0.4f);
    flat = be->allocate(w.size() * sizeof(float));
    be->copy_from_host(flat.data(), w.data(), flat.bytes());
    params = std::make_unique<model::FlatParams>(table, flat.view(DType::kF32, {static_cast<std::int64_t>(w.size())}));
  }
  // Greedy tokens by the full forward of the whole sequence so far, one new token at a time.
  std::vector<std::int32_t> greedy_without_cache(std::vector<std::int32_t> seq, int n_new) {
    auto m = model::make_model(*be, table, {.micro_batch = 1});
    std::vector<std::int32_t> out;
    for (int i = 0; i < n_new; ++i) {
      std::vector<std::int32_t> padded(seq);
      padded.resize(kT, 0);
      const std::vector<float> logits = m->forward_row_logits(padded.data(), *params, static_cast<std::int64_t>(seq.size()) - 1);
      const auto best = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(best);
      seq.push_back(best);
    }
    return out;
  }
  std::unique_ptr<backend::Backend> be;
  ParamTable table;
  backend::Buffer flat;
  std::unique_ptr<model::FlatParams> params;
};

std::vector<Request> prompts(int max_new) {
  std::vector<Request> r;
  for (int i = 0; i < 5; ++i) {
    Request q;
    for (int t = 0; t < 1 + 3 * i; ++t) q.prompt.push_back((7 * i + 13 * t + 5) % kV);  // 1 to 13 tokens
    q.max_new_tokens = max_new;
    q.stream = static_cast<std::uint64_t>(i);
    r.push_back(q);
  }
  return r;
}

class EngineGreedy : public ::testing::TestWithParam<bool> {};

TEST_P(EngineGreedy, EqualsTheFullForwardTokenByToken) {
  Model m(GetParam() ? llama() : GptShape::make(2, 4, 32, kV, kT));
  EngineOptions o{.slots = 2, .max_len = kT, .prefill_chunk = 4, .sampling = {.temperature = 0}};
  std::vector<std::size_t> order;
  o.on_done = [&](std::size_t i, const Completion&) { order.push_back(i); };
  Engine engine(*m.be, m.table, *m.params, o);
  const std::vector<Request> requests = prompts(6);
  const std::vector<Completion> got = engine.run(requests);
  ASSERT_EQ(got.size(), requests.size());
  ASSERT_EQ(order.size(), requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(cat("request ", i));
    EXPECT_EQ(got[i].tokens, m.greedy_without_cache(requests[i].prompt, 6));
    EXPECT_EQ(got[i].finish, Finish::kLength);
    ASSERT_EQ(got[i].logprobs.size(), 6u);
    for (float lp : got[i].logprobs) EXPECT_LE(lp, 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, EngineGreedy, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "llama" : "gpt2"; });

TEST(Engine, SampledTokensDoNotDependOnTheBatch) {
  Model m(llama());
  std::vector<std::vector<Completion>> runs;
  for (int slots : {1, 3, 5}) {
    Engine engine(*m.be, m.table, *m.params,
                  {.slots = slots, .max_len = kT, .prefill_chunk = 5, .sampling = {.temperature = 1.0f, .top_k = 20, .seed = 9}});
    runs.push_back(engine.run(prompts(8)));
  }
  for (std::size_t i = 0; i < runs[0].size(); ++i) {
    EXPECT_EQ(runs[1][i].tokens, runs[0][i].tokens) << "request " << i;
    EXPECT_EQ(runs[2][i].tokens, runs[0][i].tokens) << "request " << i;
  }
  bool varied = false;  // the draws are draws: not all greedy's
  Engine greedy(*m.be, m.table, *m.params, {.slots = 5, .max_len = kT, .sampling = {.temperature = 0}});
  const std::vector<Completion> g = greedy.run(prompts(8));
  for (std::size_t i = 0; i < g.size(); ++i) varied = varied || g[i].tokens != runs[0][i].tokens;
  EXPECT_TRUE(varied);
}

TEST(Engine, StopTokensLengthAndContextEndSequences) {
  Model m(GptShape::make(2, 4, 32, kV, kT));
  Engine free_run(*m.be, m.table, *m.params, {.slots = 2, .max_len = kT, .sampling = {.temperature = 0}});
  std::vector<Request> r = prompts(5);
  const std::vector<Completion> plain = free_run.run(r);
  r[1].stop_tokens = {plain[1].tokens[2]};  // its third token stops it (or an earlier equal one)
  r[4].max_new_tokens = 100;                // 13 prompt tokens: the context of kT ends it
  const std::vector<Completion> got = free_run.run(r);
  const auto stop_at = std::find(plain[1].tokens.begin(), plain[1].tokens.end(), plain[1].tokens[2]) - plain[1].tokens.begin();
  EXPECT_EQ(got[1].tokens, std::vector<std::int32_t>(plain[1].tokens.begin(), plain[1].tokens.begin() + stop_at + 1));
  EXPECT_EQ(got[1].finish, Finish::kStop);
  EXPECT_EQ(got[0].tokens, plain[0].tokens);
  EXPECT_EQ(got[0].finish, Finish::kLength);
  EXPECT_EQ(got[4].tokens.size(), std::size_t{kT - 13});  // positions 13..kT-1
  EXPECT_EQ(got[4].finish, Finish::kLength);
  // The caller's stop rule (zgen's stop strings) ends a sequence after the token it sees.
  EngineOptions o{.slots = 2, .max_len = kT, .sampling = {.temperature = 0}};
  o.stop_rule = [](std::size_t i, const Completion& c) { return i == 2 && c.tokens.size() == 2; };
  Engine ruled(*m.be, m.table, *m.params, o);
  const std::vector<Completion> cut = ruled.run(prompts(5));
  EXPECT_EQ(cut[2].tokens.size(), 2u);
  EXPECT_EQ(cut[2].finish, Finish::kStop);
}

TEST(Engine, RefusesPromptsThatDoNotFit) {
  Model m(GptShape::make(2, 4, 32, kV, kT));
  Engine engine(*m.be, m.table, *m.params, {.slots = 2, .max_len = 11});
  std::vector<Request> r = prompts(3);  // request 4 has 13 tokens
  try {
    engine.run(r);
    FAIL() << "a 13-token prompt in a context of 11 ran";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("request 4's prompt has 13 tokens"), std::string::npos) << e.what();
  }
  r = {Request{.prompt = {3, kV}}};
  EXPECT_THROW(engine.run(r), ConfigError);
  EXPECT_THROW(Engine(*m.be, m.table, *m.params, {.slots = 1, .max_len = kT + 1}), Error);
}

}  // namespace
}  // namespace zt::gen
