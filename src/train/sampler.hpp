// Text samples from the model in training: continue a prompt token by token (top-k sampling at a
// temperature: gen/sampling.hpp) and decode it with the tokenizer. Deterministic: the draws come from
// the counter RNG (seed, step, position), so every rank computes the same sample (ZeRO-3 needs all ranks in the
// forward passes) and reruns print the same text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/model.hpp"
#include "tok/tokenizer.hpp"

namespace zt::train {

struct SampleOptions {
  int n_tokens = 64;
  float temperature = 0.8f;
  int top_k = 40;
  std::uint64_t seed = 0;
  std::uint64_t step = 0;  // folded into the draws, so each logged sample differs
};

// `before_each_forward` runs before every forward pass (ZeRO-3 sets its gather order there).
std::string sample_text(model::Model& gpt, model::ParamSource& params, const tok::Tokenizer& tokenizer,
                        const std::string& prompt, const SampleOptions& options,
                        const std::function<void()>& before_each_forward = {});

// The same over any forward pass: next_logits(window, n) gives the V logits at position n - 1 of a
// window of micro_batch x shape.seq_len tokens whose row 0 holds the sequence (a pipeline computes
// them on its last stage and shares that row: train/pipeline_stage.hpp).
using NextLogits = std::function<std::vector<float>(const std::int32_t* window, int n)>;
std::string sample_text(const NextLogits& next_logits, const model::GptShape& shape, int micro_batch,
                        const tok::Tokenizer& tokenizer, const std::string& prompt, const SampleOptions& options);

}  // namespace zt::train
