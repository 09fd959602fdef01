// zgen's output lines (docs/INTERFACE.md "zgen"; its prompt lines are gen/prompt_io.hpp's). One JSON line per sample,
//   {"id", ["sample",] "text", "token_ids", "logprobs", "finish_reason"[, "answer", "reference", "score"]}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gen/answers.hpp"
#include "gen/engine.hpp"
#include "gen/prompt_io.hpp"

namespace zt::apps {

using gen::Completion;
using gen::PromptLine;

struct Scored {
  std::optional<std::string> answer;  // what the rule took from the text
  double score = 0;
  std::string reference;              // the reference field reduced by the rule: what the answer was scored against
};

// One output line (no trailing newline). sample < 0: no "sample" field (one sample per prompt).
std::string output_line(const PromptLine& p, int sample, const Completion& c, const std::optional<std::string>& text,
                        const Scored* scored);

}  // namespace zt::apps
