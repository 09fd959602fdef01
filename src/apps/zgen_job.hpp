// zgen's job: its options (the flags, checked) and everything it refuses before work (outputs, model,
// tokenizer, chat template, prompts, context, memory), so that zgen.cpp's main only generates and writes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/command_line.hpp"
#include "dist/placement.hpp"
#include "dist/world.hpp"
#include "gen/answers.hpp"
#include "gen/engine.hpp"
#include "gen/prompt_io.hpp"
#include "model/saved_model.hpp"
#include "tok/encoding.hpp"
#include "ztok/chat_template.hpp"

namespace zt::apps {

struct Options {
  std::string model, prompts, out, tokenizer, summary, answer_field, pattern;
  std::vector<std::string> specials, stops;
  std::vector<std::int32_t> stop_ids;
  std::optional<ztok::ChatTemplate> chat_template;
  std::optional<gen::AnswerRule> rule;
  gen::SamplingParams sampling;
  std::int64_t max_new = 256, max_len = 0, prefill_chunk = 256;
  int samples = 1, slots = 32, tp = 1, threads = 0, prefill_rows = 4;
  bool ignore_eos = false, quiet = false;
  config::Device device = config::Device::kAuto;
  std::string dtype = "auto";
  double timeout_s = 600, memory_gb = 0;
};

// The flags as options; exit-2 errors for what no model needs to be read to refuse.
Options options_of(const config::cli::Args& a);

struct Job {
  Options o;
  std::unique_ptr<model::SavedModel> model;
  model::ReadRange weights;  // the model's fp32 weights by range (model::saved_weights_reader)
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::optional<ztok::ChatTemplate> chat;
  std::vector<gen::PromptLine> prompts;
  std::vector<std::int32_t> stop_tokens;
  std::int64_t max_len = 0;
  dist::Placement placement;
  DType dtype = DType::kF32;
};

// Everything that can be refused before work: outputs, options, model, tokenizer, prompts, the context, memory.
void prepare(Job& j, const dist::World& world);

// The engine's options for `slots` sequences at once.
gen::EngineOptions engine_options(const Job& j, int slots);

}  // namespace zt::apps
