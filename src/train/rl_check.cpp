// RL's start-up check and the inputs it shares with the trainer (rl_check.hpp).
#include "train/rl_check.hpp"

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "gen/engine.hpp"
#include "rl/batch_rules.hpp"
#include "train/data_check.hpp"

namespace zt::train {

const tok::Tokenizer& rl_tokenizer(const config::Config& c) {
  std::string path = c.data.vocab;
  const std::filesystem::path hf = std::filesystem::path(c.init.from) / "tokenizer.json";
  if (path.empty() && !c.init.from.empty() && std::filesystem::exists(hf)) path = hf.string();
  if (path.empty())
    throw ConfigError("rl.reward scores the responses' text: set data.vocab (a GPT-2 directory, a .tiktoken file or a "
                      "tokenizer.json), or init.from a Hugging Face directory holding tokenizer.json");
  return load_tokenizer(path);
}

std::vector<gen::PromptLine> read_rl_prompts(const config::Config& c, const tok::Tokenizer& tokenizer) {
  gen::PromptFormat format{&tokenizer, gen::template_of_tokenizer(&tokenizer), c.rl.answer_field};
  format.tokenizer_hint = "set data.vocab";
  format.template_hint = "the tokenizer has the special tokens of no chat template (chatml, llama3)";
  format.answer_hint = "rl.answer_field";
  return gen::read_prompts(c.rl.prompts, format);
}

std::int64_t rl_max_len(const config::Config& c, const std::vector<gen::PromptLine>& prompts) {
  std::int64_t longest = 0;
  for (const gen::PromptLine& p : prompts) longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(p.ids.size()));
  const std::int64_t max_len = std::min(c.model.seq_len, longest + c.rl.max_new_tokens);
  for (std::size_t i = 0; i < prompts.size(); ++i)
    gen::check_request({prompts[i].ids, c.rl.max_new_tokens, {}, 0}, i, c.model.vocab_size, max_len,
                       cat(prompts[i].where, " (rl.prompts; model.seq_len=", c.model.seq_len, ")"));
  return max_len;
}

void check_rl_inputs(const config::Config& c, std::int64_t dp_size) {
  rl::check_batch_layout(rl::layout_of(c, static_cast<int>(dp_size)));
  rl_max_len(c, read_rl_prompts(c, rl_tokenizer(c)));
}

}  // namespace zt::train
