// Answer evaluation during training (log.eval_prompts, at log.eval_every): the prompts generated from the
// weights being trained (the generation engine on the trainer's parameters, a LoRA run's adapters
// applied), each response scored against its reference by an answer rule (gen/answers.hpp), reduced over
// the data-parallel ranks: accuracy, pass@1 and pass@k, as zgen's evaluation reports them. The prompts are
// dealt to the data-parallel ranks round robin, every sample of a prompt on one rank; the engine (its KV
// cache) lives only while it runs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/communicator.hpp"
#include "dist/world.hpp"
#include "gen/answers.hpp"
#include "gen/engine.hpp"
#include "gen/prompt_io.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"

namespace zt::train {

struct AnswerScores {
  double accuracy = 0, pass_at_1 = 0, pass_at_k = 0;
  std::int64_t prompts = 0, samples = 0;  // per prompt
  double seconds = 0;                     // the slowest rank's
};

class AnswerEvaluation {
 public:
  // Reads and checks log.eval_prompts (the tokenizer: data.vocab, else init.from's tokenizer.json).
  explicit AnswerEvaluation(const config::Config& c);
  // Collective over dp (the data-parallel group; every rank of a TP group runs the same prompts over
  // options.tp_group) and over `world`, whose ranks wait for each other's shares as long as they work
  // (dist::PatientWait: shares of other lengths take other times). table and params: the model's (this
  // rank's part under TP); options.lora: a LoRA run's adapters, made for gen::forward_rows(options).
  AnswerScores run(backend::Backend& be, const model::ParamTable& table, model::ParamSource& params,
                   const gen::EngineOptions& options, dist::Communicator& dp, int dp_rank, const dist::World& world);
  // The engine's options for this evaluation on one of dp data-parallel ranks (gen::evaluation_engine
  // with its sampling, gen::dealt_slots).
  gen::EngineOptions engine_options(const config::Config& c, std::int64_t dp) const;
  std::int64_t prompt_count() const { return static_cast<std::int64_t>(prompts_.size()); }
  // Its sequences' length: the longest prompt + log.eval_max_new_tokens, at most model.seq_len.
  std::int64_t max_len() const { return max_len_; }
  std::int64_t longest_prompt() const { return longest_prompt_; }

 private:
  const config::Config& config_;
  const tok::Tokenizer* tokenizer_ = nullptr;
  const std::vector<gen::PromptLine>& prompts_;  // read_answer_prompts' lines (kept for the process)
  std::vector<std::int32_t> stop_tokens_;
  gen::AnswerRule rule_;
  std::int64_t max_len_ = 0, longest_prompt_ = 0;
};

// log.eval_prompts as a start-up check (exit 2 naming the file and line): readable, each line with its
// reference, each prompt leaving room for one new token in model.seq_len; the answer rule valid.
void check_eval_prompts(const config::Config& c);

}  // namespace zt::train
