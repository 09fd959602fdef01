// Answer evaluation during training (answer_eval.hpp).
#include "train/answer_eval.hpp"

#include <algorithm>
#include <chrono>

#include "dist/patient_wait.hpp"
#include "model/from_config.hpp"
#include "train/prompt_check.hpp"

namespace zt::train {
namespace {

const std::vector<gen::PromptLine>& read_eval_prompts(const config::Config& c) {
  return read_answer_prompts(c, PromptSet::kEvaluation);
}

}  // namespace

void check_eval_prompts(const config::Config& c) {
  gen::AnswerRule::parse(c.log.eval_answer_rule, "log.eval_answer_rule");
  max_sequence_len(c, read_eval_prompts(c), c.log.eval_max_new_tokens, "log.eval_prompts");
}

AnswerEvaluation::AnswerEvaluation(const config::Config& c)
    : config_(c), tokenizer_(&text_tokenizer(c, "log.eval_prompts")), prompts_(read_eval_prompts(c)),
      rule_(gen::AnswerRule::parse(c.log.eval_answer_rule, "log.eval_answer_rule")),
      max_len_(max_sequence_len(c, prompts_, c.log.eval_max_new_tokens, "log.eval_prompts")),
      longest_prompt_(train::longest_prompt(prompts_)) {
  stop_tokens_ = gen::end_tokens(*tokenizer_, gen::template_of_tokenizer(tokenizer_));
}

gen::EngineOptions AnswerEvaluation::engine_options(const config::Config& c, std::int64_t dp) const {
  gen::EngineOptions e = gen::evaluation_engine(gen::dealt_slots(c.log.eval_slots, prompt_count(), c.log.eval_samples, dp),
                                                max_len_, model::compute_dtype(c.train.precision), longest_prompt());
  e.sampling = {static_cast<float>(c.log.eval_temperature), 0, 1.0f, c.train.seed};
  e.drawable = static_cast<std::int64_t>(std::min<std::uint64_t>(tokenizer_->n_ids(), c.model.vocab_size));
  return e;
}

AnswerScores AnswerEvaluation::run(backend::Backend& be, const model::ParamTable& table, model::ParamSource& params,
                                   const gen::EngineOptions& options, dist::Communicator& dp, int dp_rank,
                                   const dist::World& world) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto samples = static_cast<int>(config_.log.eval_samples);
  std::vector<std::size_t> mine;  // prompts dealt round robin: every sample of a prompt on this rank
  for (std::size_t p = static_cast<std::size_t>(dp_rank); p < prompts_.size(); p += static_cast<std::size_t>(dp.size()))
    mine.push_back(p);
  std::vector<gen::Request> requests;
  for (std::size_t p : mine)
    for (int s = 0; s < samples; ++s)
      requests.push_back({prompts_[p].ids, config_.log.eval_max_new_tokens, stop_tokens_,
                          static_cast<std::uint64_t>(p) * static_cast<std::uint64_t>(samples) + static_cast<std::uint64_t>(s)});
  std::vector<gen::Completion> done;
  {
    // A rank whose prompts finish early waits for the others while they work, not a collective's
    // dist.timeout_s from its arrival (outside sweep 36 F6: the run aborted, and again at each resume).
    dist::PatientWait finishing(world, config_.dist.timeout_s, "answer evaluation: waiting for every rank to finish its prompts",
                                cat("dist.timeout_s=", config_.dist.timeout_s, " s without a sign of life"),
                                static_cast<int>(config_.parallel.tp));
    gen::EngineOptions beating = options;
    beating.on_step = [&finishing] { finishing.beat(); };
    gen::Engine engine(be, table, params, beating);  // its cache and activations go when the evaluation ends
    done = engine.run(requests);
    finishing.arrive();
  }
  std::vector<gen::ScoredSample> scored;
  for (std::size_t k = 0; k < done.size(); ++k) {
    const gen::PromptLine& p = prompts_[mine[k / static_cast<std::size_t>(samples)]];
    const std::string text = gen::completion_text(done[k], *tokenizer_, {}, stop_tokens_);
    scored.push_back({k / static_cast<std::size_t>(samples), rule_.score(text, rule_.reduce_reference(*p.reference))});
  }
  const gen::EvalSummary here = gen::summarize(scored, samples);  // means over this rank's prompts
  const double n = static_cast<double>(mine.size());
  std::vector<double> sums = {here.accuracy * n, here.pass_at_1 * n, here.pass_at_samples * n, n};
  dp.all_reduce_values(sums, dist::ReduceOp::kSum);
  std::vector<double> seconds = {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  dp.all_reduce_values(seconds, dist::ReduceOp::kMax);
  const double prompts = std::max(1.0, sums[3]);
  return {sums[0] / prompts, sums[1] / prompts, sums[2] / prompts, static_cast<std::int64_t>(sums[3]), samples, seconds[0]};
}

}  // namespace zt::train
