// Sampling the next token (sampling.hpp).
#include "gen/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace zt::gen {
namespace {

// log sum exp over the drawable logits, for the logprob.
double log_normaliser(std::span<const float> logits) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - top);
  return top + std::log(sum);
}

// The ids a draw may choose, most likely first (the smaller id first on a tie): the top_k (all when 0) and
// every id tied with the k-th logit, as Hugging Face's TopKLogitsWarper removes only the logits below it
// (and vLLM's top-k; outside sweep 36 F9: exactly k kept the smaller ids of a tie, bf16 logits tie often),
// then the shortest prefix whose probability at `temperature` reaches top_p (at least one). probs: their
// renormalised probabilities. The order is a total one, so a draw stays a pure function of its inputs.
std::vector<std::uint32_t> candidates(std::span<const float> logits, const SamplingParams& p, std::vector<double>& probs) {
  std::vector<std::uint32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0u);
  std::size_t k = p.top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(p.top_k), ids.size()) : ids.size();
  auto before = [&](std::uint32_t a, std::uint32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), before);
  if (k < ids.size()) {  // the ids left that tie with the k-th: all larger than the tied ones in, by id
    const float kth = logits[ids[k - 1]];
    const auto tied = std::partition(ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                                     [&](std::uint32_t id) { return logits[id] == kth; });
    std::sort(ids.begin() + static_cast<std::ptrdiff_t>(k), tied);
    k = static_cast<std::size_t>(tied - ids.begin());
  }
  ids.resize(k);
  probs.resize(k);
  const double top = logits[ids[0]];
  double sum = 0;
  for (std::size_t i = 0; i < k; ++i) sum += probs[i] = std::exp((logits[ids[i]] - top) / p.temperature);
  std::size_t keep = k;
  if (p.top_p < 1.0f) {
    double acc = 0;
    for (keep = 0; keep < k;) {
      acc += probs[keep++] / sum;
      if (acc >= p.top_p) break;
    }
  }
  ids.resize(keep);
  probs.resize(keep);
  const double kept = std::accumulate(probs.begin(), probs.end(), 0.0);
  for (double& q : probs) q /= kept;
  return ids;
}

}  // namespace

Draw sample_token(std::span<const float> all, std::int64_t drawable, const SamplingParams& p, std::uint64_t stream,
                  std::uint64_t position) {
  ZT_CHECK(drawable > 0 && static_cast<std::size_t>(drawable) <= all.size(), "sample_token: ", drawable,
           " drawable ids of ", all.size(), " logits");
  const std::span<const float> logits = all.first(static_cast<std::size_t>(drawable));
  Draw d;
  if (p.temperature <= 0) {
    d.token = static_cast<std::uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  } else {
    std::vector<double> probs;
    const std::vector<std::uint32_t> ids = candidates(logits, p, probs);
    static const std::uint64_t purpose = rng::purpose_id("generate");
    const double u = rng::uniform(p.seed, purpose, (stream << 32) ^ position);
    double acc = 0;
    d.token = ids.back();
    for (std::size_t i = 0; i < ids.size(); ++i)
      if ((acc += probs[i]) > u) {
        d.token = ids[i];
        break;
      }
  }
  d.logprob = static_cast<float>(logits[d.token] - log_normaliser(logits));
  return d;
}

void check_sampling(const SamplingParams& p, const char* what) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature))
    throw ConfigError(cat(what, "temperature=", p.temperature, " must be >= 0 (0: greedy)"));
  if (p.top_k < 0) throw ConfigError(cat(what, "top_k=", p.top_k, " must be >= 0 (0: every id)"));
  if (!(p.top_p > 0 && p.top_p <= 1))
    throw ConfigError(cat(what, "top_p=", p.top_p, " must be in (0, 1] (1: no nucleus cut)"));
}

}  // namespace zt::gen
