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
  EXPECT_EQ(sample_token(l, 5, {.temperature = 1, .top_k = 1}, 0, 0).token, 4u);  // top_k 1 without a tie: greedy
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

// Top-k keeps every id tied with the k-th logit, as Hugging Face's TopKLogitsWarper (scores < kth removed)
// and vLLM (outside sweep 36 F9: exactly k were kept, the smaller ids of the tie); top_k 1 with a tie at
// the top draws among the tied. The draws stay a pure function of (seed, stream, position).
TEST(Sampling, TopKKeepsEveryIdTiedWithTheKth) {
  const int n = 20000;
  std::vector<float> l(50, 0.0f);  // one id ahead of 49 tied: top_k 3 keeps all 50
  l[7] = 1.0f;
  const double z = std::exp(1.0) + 49;
  std::vector<double> want(50, 1 / z);
  want[7] = std::exp(1.0) / z;
  expect_frequencies(histogram(l, {.top_k = 3}, n), want, n);
  EXPECT_EQ(histogram(l, {.top_k = 3}, n).size(), 50u);
  // Weights 0.4, 0.3 twice, 0.2, 0.1: top_k 2 and 3 keep 0.4 and both 0.3s, 4 adds 0.2; what is below the k-th goes.
  const std::vector<float> m = logits_of({0.4, 0.2, 0.3, 0.1, 0.3});
  expect_frequencies(histogram(m, {.top_k = 2}, n), {0.4, 0, 0.3, 0, 0.3}, n);
  expect_frequencies(histogram(m, {.top_k = 3}, n), {0.4, 0, 0.3, 0, 0.3}, n);
  expect_frequencies(histogram(m, {.top_k = 4}, n), {0.4 / 1.2, 0.2 / 1.2, 0.3 / 1.2, 0, 0.3 / 1.2}, n);
  // top_k 1 on a tie at the top: both, evenly.
  const std::vector<float> tie{0.5f, 2.0f, 2.0f, -1.0f};
  expect_frequencies(histogram(tie, {.top_k = 1}, n), {0, 0.5, 0.5, 0}, n);
  for (int pos = 0; pos < 20; ++pos)  // reproducible
    EXPECT_EQ(sample_token(l, 50, {.top_k = 3, .seed = 9}, 4, pos).token,
              sample_token(l, 50, {.top_k = 3, .seed = 9}, 4, pos).token);
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
