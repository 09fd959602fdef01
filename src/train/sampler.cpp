// Autoregressive sampling with the training model's fixed [B, T] shape: the sequence sits in row 0,
// positions after the last real token hold token 0 (causal attention: they cannot affect the logits
// read at the last real position). Each new token costs one forward pass; past T tokens the window
// slides.
#include "train/sampler.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "gen/sampling.hpp"

namespace zt::train {

std::string sample_text(model::Model& gpt, model::ParamSource& params, const tok::Tokenizer& tokenizer,
                        const std::string& prompt, const SampleOptions& o, const std::function<void()>& before) {
  const NextLogits next = [&](const std::int32_t* window, int n) {
    if (before) before();
    return gpt.forward_row_logits(window, params, n - 1);  // [V] at row 0's position n - 1
  };
  return sample_text(next, gpt.table().shape(), gpt.micro_batch(), tokenizer, prompt, o);
}

std::string sample_text(const NextLogits& next_logits, const model::GptShape& s, int B, const tok::Tokenizer& tokenizer,
                        const std::string& prompt, const SampleOptions& o) {
  const int T = s.seq_len;
  std::vector<std::uint32_t> ids;
  if (tokenizer.bos() != tok::Vocab::kNone) ids.push_back(tokenizer.bos());  // documents start with it
  tok::Encoder(tokenizer).encode(prompt, ids);
  if (ids.empty()) ids.push_back(tokenizer.eot());  // an empty prompt starts a new document
  // Only ids the tokenizer can write out are drawn: a padded model vocabulary's, and a fine-tuned
  // model's specials above the vocabulary (ztok --special, model.vocab_size covering them), are not.
  const int drawable = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(s.vocab_size), tokenizer.vocab().size()));
  const gen::SamplingParams sampling{.temperature = o.temperature, .top_k = o.top_k, .seed = o.seed};
  std::vector<std::int32_t> window(static_cast<std::size_t>(B) * T, 0);
  for (int i = 0; i < o.n_tokens; ++i) {
    const std::size_t start = ids.size() > static_cast<std::size_t>(T) ? ids.size() - T : 0;
    const int n = static_cast<int>(ids.size() - start);
    std::fill(window.begin(), window.end(), 0);
    std::copy(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.end(), window.begin());
    const std::vector<float> logits = next_logits(window.data(), n);  // [V] at position n - 1
    ids.push_back(gen::sample_token(logits, drawable, sampling, o.step, static_cast<std::uint64_t>(i)).token);
  }
  return tokenizer.decode(std::span<const std::uint32_t>(ids.data(), ids.size()));
}

}  // namespace zt::train
