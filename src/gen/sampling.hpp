// The next token from a model's logits, as Hugging Face's generate() and vLLM's SamplingParams choose
// it: greedy (temperature 0), else temperature, then top-k (the k largest logits and every one tied with
// the k-th: top_k = 1 is greedy but for a tie at the top), then top-p (nucleus) over what is left,
// renormalised (HF's logits-processor order). Every draw is a pure function of (seed,
// stream, position): a sequence's tokens are the same whatever the batch it ran in, the world size or
// the order the others finished (the counter RNG, core/rng.hpp). `stream` names the sequence (zgen: its
// prompt's index and sample; training's samples: the step).
#pragma once

#include <cstdint>
#include <span>

namespace zt::gen {

struct SamplingParams {
  float temperature = 1.0f;  // <= 0: greedy
  int top_k = 0;             // 0: every id
  float top_p = 1.0f;        // (0, 1]; 1: every id top-k left
  std::uint64_t seed = 0;
};

struct Draw {
  std::uint32_t token = 0;
  // log p(token) under the model's own distribution, log_softmax of the raw logits over the drawable
  // ids only (a padded vocabulary's rows past them left out, where a full-vocabulary log-softmax counts
  // them; docs/guide/generation.md); an RL trainer recomputes its policy's from the same weights.
  float logprob = 0;
};

// Draws from logits[0, drawable): ids at or past `drawable` (a padded model vocabulary; specials above the
// tokenizer's) are never drawn. Ties in greedy go to the smaller id.
Draw sample_token(std::span<const float> logits, std::int64_t drawable, const SamplingParams& params,
                  std::uint64_t stream, std::uint64_t position);

// Throws ConfigError naming the key unless temperature >= 0, top_k >= 0 and 0 < top_p <= 1 (`what`
// prefixes the keys: "zgen --" or "log.sample_").
void check_sampling(const SamplingParams& params, const char* what);

}  // namespace zt::gen
