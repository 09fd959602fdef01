// Sampling the next token (gen/sampling.hpp): greedy, temperature, top-k and top-p as Hugging Face's
// generate() applies them, logprobs of the raw distribution, and draws that depend only on (seed,
// stream, position).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "core/error.hpp"
#include "gen/sampling.hpp"

namespace zt::gen {
namespace {

// Logits whose softmax is exactly `probs` (log p).
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::map<std::uint32_t, int> histogram(const std::vector<float>& logits, const SamplingParams& p, int n,
                                       std::int64_t drawable = -1) {
  std::map<std::uint32_t, int> h;
  for (int i = 0; i < n; ++i)
    ++h[sample_token(logits, drawable < 0 ? std::int64_t(logits.size()) : drawable, p, 3, i).token];
  return h;
}

TEST(Sampling, GreedyTakesTheLargestDrawableLogitAndTheSmallerIdOnATie) {
  const std::vector<float> l{0.5f, 2.0f, 2.0f, -1.0f, 9.0f};
  EXPECT_EQ(sample_token(l, 4, {.temperature = 0}, 0, 0).token, 1u);  // id 4 is past the drawable ids
  EXPECT_EQ(sample_token(l, 5, {.temperature = 0}, 0, 0).token, 4u);
  EXPECT_EQ(sample_token(l, 4, {.temperature = 1, .top_k = 1}, 0, 0).token, 1u);
}

TEST(Sampling, LogprobIsTheRawLogSoftmaxOfTheDrawnToken) {
  const std::vector<float> l = logits_of({0.5, 0.3, 0.2});
  for (int pos = 0; pos < 20; ++pos) {
    const Draw d = sample_token(l, 3, {.temperature = 0.7f, .seed = 5}, 1, pos);
    EXPECT_NEAR(d.logprob, l[d.token], 1e-6) << pos;
  }
}

TEST(Sampling, ADrawDependsOnlyOnSeedStreamAndPosition) {
  const std::vector<float> l(1000, 0.0f);  // uniform: every id is as likely
  const SamplingParams p{.seed = 11};
  EXPECT_EQ(sample_token(l, 1000, p, 7, 42).token, sample_token(l, 1000, p, 7, 42).token);
  int differ_stream = 0, differ_seed = 0;
  for (int pos = 0; pos < 50; ++pos) {
    const std::uint32_t t = sample_token(l, 1000, p, 7, pos).token;
    differ_stream += t != sample_token(l, 1000, p, 8, pos).token;
    differ_seed += t != sample_token(l, 1000, {.seed = 12}, 7, pos).token;
  }
  EXPECT_GT(differ_stream, 40);
  EXPECT_GT(differ_seed, 40);
}

// Frequencies of 20,000 draws within 4 standard deviations of the target probabilities.
void expect_frequencies(const std::map<std::uint32_t, int>& h, const std::vector<double>& want, int n) {
  for (std::size_t id = 0; id < want.size(); ++id) {
    const double got = h.count(id) ? h.at(id) : 0, mean = want[id] * n;
    EXPECT_NEAR(got, mean, 4 * std::sqrt(n * want[id] * (1 - want[id])) + 1e-9) << "id " << id;
  }
}

TEST(Sampling, TemperatureTopKAndTopPGiveTheirDistributions) {
  const int n = 20000;
  const std::vector<float> l = logits_of({0.4, 0.3, 0.2, 0.1});
  expect_frequencies(histogram(l, {}, n), {0.4, 0.3, 0.2, 0.1}, n);
  // Temperature 2: p^(1/2), renormalised.
  const double z = std::sqrt(0.4) + std::sqrt(0.3) + std::sqrt(0.2) + std::sqrt(0.1);
  expect_frequencies(histogram(l, {.temperature = 2}, n),
                     {std::sqrt(0.4) / z, std::sqrt(0.3) / z, std::sqrt(0.2) / z, std::sqrt(0.1) / z}, n);
  // top_k = 2: the two largest, renormalised.
  expect_frequencies(histogram(l, {.top_k = 2}, n), {0.4 / 0.7, 0.3 / 0.7, 0, 0}, n);
  // top_p = 0.6: 0.4 < 0.6, 0.4 + 0.3 >= 0.6: the first two; 0.4 exactly: the first alone.
  expect_frequencies(histogram(l, {.top_p = 0.6f}, n), {0.4 / 0.7, 0.3 / 0.7, 0, 0}, n);
  expect_frequencies(histogram(l, {.top_p = 0.35f}, n), {1, 0, 0, 0}, n);
  // Undrawable ids never come, however likely.
  EXPECT_EQ(histogram(logits_of({0.1, 0.1, 0.8}), {}, 2000, 2).count(2), 0u);
}

TEST(Sampling, BadParametersNameTheKey) {
  EXPECT_THROW(check_sampling({.temperature = -1}, "--"), ConfigError);
  EXPECT_THROW(check_sampling({.top_k = -2}, "--"), ConfigError);
  EXPECT_THROW(check_sampling({.top_p = 0}, "--"), ConfigError);
  EXPECT_THROW(check_sampling({.top_p = 1.5f}, "--"), ConfigError);
  try {
    check_sampling({.top_p = 2}, "zgen --");
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("zgen --top_p=2"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_sampling({.temperature = 0, .top_k = 0, .top_p = 1}, "--"));
}

}  // namespace
}  // namespace zt::gen
