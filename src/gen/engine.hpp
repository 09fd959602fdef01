// The generation engine: many prompts through one model with a KV cache and continuous batching (Orca,
// vLLM): every sequence in flight holds a cache slot; a waiting prompt takes a free slot as soon as one
// is left by a finished sequence, is prefilled in chunks with other waiting prompts (their keys and values
// in a few forwards), then joins the decoding batch, where each step advances every sequence in flight by one
// token. The model is the training model (model/decoder.hpp) made for generation twice: prefill rows of
// prefill_chunk tokens and decoding rows of one token, over the same weights and cache.
//
// Under tensor parallelism every rank of the group runs the same engine on the same requests: the
// logits come back whole on each (gathered), the draws are pure functions of (seed, stream, position),
// so the ranks agree without a word. Data-parallel ranks run engines of their own on their share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "gen/sampling.hpp"
#include "model/lora.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"

namespace zt::gen {

struct Request {
  std::vector<std::int32_t> prompt;        // at least one token
  std::int64_t max_new_tokens = 16;        // at least 1
  std::vector<std::int32_t> stop_tokens;   // a drawn one ends the sequence (kept as its last token)
  std::uint64_t stream = 0;                // the sampling stream (sampling.hpp): its index in the input
};

enum class Finish { kStop, kLength };  // a stop token (or the caller's stop rule); max_new_tokens or the context
const char* finish_name(Finish f);     // "stop", "length" (vLLM's and OpenAI's finish_reason)

struct Completion {
  std::vector<std::int32_t> tokens;  // the new tokens
  std::vector<float> logprobs;       // each token's log-probability (sampling.hpp: Draw::logprob)
  Finish finish = Finish::kLength;
};

struct EngineOptions {
  int slots = 8;                        // sequences decoded together (the decoding batch)
  std::int64_t max_len = 0;             // prompt + new tokens of one sequence; at most the model's seq_len
  std::int64_t prefill_chunk = 128;     // tokens of each prompt per prefill forward
  int prefill_rows = 4;                 // prompts prefilled together (rows of a prefill forward)
  DType compute = DType::kF32;          // the activations' and the cache's dtype (the weights')
  dist::Communicator* tp_group = nullptr;
  // LoRA adapters on the weights (an RL actor's, live as they train): both of the engine's models take
  // them. Made for at least forward_rows(options) token rows; null: none.
  model::Lora* lora = nullptr;
  SamplingParams sampling;
  std::int64_t drawable = 0;            // ids [0, drawable) can be drawn; 0: the model's vocab_size
  // Called after each new token: true ends the sequence with finish kStop (stop strings, zgen).
  std::function<bool(std::size_t request, const Completion& so_far)> stop_rule;
  // Called once per finished request (progress, output in order).
  std::function<void(std::size_t request, const Completion& done)> on_done;
  // Called after every prefill and decoding step: a liveness beat (dist::PatientWait), progress.
  std::function<void()> on_step;
};

// Where the last run's time went (benchmarks, zgen's closing line): prompts' tokens through prefill,
// decoding steps and the tokens they drew (the first token of each sequence comes from its prefill).
struct EngineStats {
  std::int64_t prefill_tokens = 0, decode_steps = 0, decode_tokens = 0;
  double prefill_s = 0, decode_s = 0;
};

class Engine {
 public:
  // table: the model's (tp_local_table under TP); params: its weights in options.compute, held by the
  // caller. Allocates the cache and both models' activations.
  Engine(backend::Backend& be, const model::ParamTable& table, model::ParamSource& params, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Every request to its end, in any order internally; the completions in the requests' order. A prompt
  // that leaves no room for one new token in max_len is refused (ConfigError naming it) before any work.
  std::vector<Completion> run(const std::vector<Request>& requests);
  const EngineStats& stats() const;

  // What an engine with these options allocates on the backend for a model of this shape on tp ranks
  // (the cache, both models' activations, the logits of one step; on_cuda: the CUDA backend's attention
  // over the cache adds its split partials' scratch): the memory planner's figure.
  static std::size_t bytes(const model::GptShape& shape, int tp, const EngineOptions& options, bool on_cuda);
  // The CPU backend's scratch its passes grow (fp32 copies of 16-bit GEMM operands, the widened LM head the
  // largest; 0 in fp32): one buffer the backend keeps and every op shares, so a plan takes the larger of this
  // and a training step's (model::cpu_workspace_bytes), not their sum.
  static std::size_t cpu_workspace_bytes(const model::GptShape& shape, int tp, const EngineOptions& options);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The answer evaluation's engine at log.eval_every (train::AnswerEvaluation's, and the memory plan's):
// `slots` sequences of max_len tokens, prompts prefilled whole (whole_prompt_chunk), in `compute`; the caller
// adds its sampling.
EngineOptions evaluation_engine(int slots, std::int64_t max_len, DType compute, std::int64_t prompt_len = 0);

// The prefill chunk that takes every prompt whole: the longest prompt (prompt_len, known), else max_len,
// their bound. A chunk of max_len would run the padding up to max_len through the model too: about as many
// token passes as the decoding's, for nothing.
std::int64_t whole_prompt_chunk(std::int64_t max_len, std::int64_t prompt_len);
// An engine's slots on one of dp ranks dealt `prompts` prompts round robin, `samples` sequences each (the
// answer evaluation's, zgen's, RL's rollouts'): at most `slots`, and no more than the busiest rank's sequences (a slot
// more holds nothing); prompts 0: unknown, `slots`.
int dealt_slots(std::int64_t slots, std::int64_t prompts, std::int64_t samples, std::int64_t dp);

// The most token rows one forward of the engine runs: a prefill's (its rows, at most slots, x the chunk) or
// a decoding step's (one per slot). What a LoRA it takes is made for, and what cached attention's scratch spans.
std::int64_t forward_rows(const EngineOptions& options);

// Throws ConfigError naming the request (its index, `what` names the input: a file and line) unless its
// prompt is non-empty, its ids in [0, vocab), and prompt + 1 new token fit max_len. `limit` says what sets
// max_len and the fix, after "no room for a new one in " (default: "the context of N: shorten it").
void check_request(const Request& r, std::size_t index, std::int64_t vocab, std::int64_t max_len, const std::string& what,
                   const std::string& limit = "");

}  // namespace zt::gen
