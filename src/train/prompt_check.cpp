// The trainer's prompt sets and their start-up checks (prompt_check.hpp).
#include "train/prompt_check.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/error.hpp"
#include "tok/encoding.hpp"
#include "ztok/chat_template.hpp"
#include "data/shard_set.hpp"
#include "gen/engine.hpp"
#include "rl/batch_rules.hpp"
#include "train/data_check.hpp"

namespace zt::train {

std::string run_tokenizer_path(const config::Config& c) {
  if (!c.data.vocab.empty()) return c.data.vocab;
  const std::filesystem::path hf = std::filesystem::path(c.init.from) / "tokenizer.json";
  std::error_code ec;
  return !c.init.from.empty() && std::filesystem::exists(hf, ec) ? hf.string() : "";
}

namespace {
std::string text_tokenizer_path(const config::Config& c, const std::string& key) {
  const std::string path = run_tokenizer_path(c);
  if (path.empty())
    throw ConfigError(cat(key, " reads and scores text: set data.vocab (a GPT-2 directory, a .tiktoken file or a "
                          "tokenizer.json), or init.from a Hugging Face directory holding tokenizer.json"));
  return path;
}

struct SetKeys {
  const std::string& glob;
  std::string glob_key;
  const std::string& answer_field;
  std::string answer_key;
};
SetKeys keys_of(const config::Config& c, PromptSet set) {
  if (set == PromptSet::kRl) return {c.rl.prompts, "rl.prompts", c.rl.answer_field, "rl.answer_field"};
  return {c.log.eval_prompts, "log.eval_prompts", c.log.eval_answer_field, "log.eval_answer_field"};
}
}  // namespace

gen::ChatChoice training_data_template(const config::Config& c, gen::ChatChoice chat) {
  if (chat.model_template) return chat;
  const std::string name = data::recorded_chat_template(c.data.train);
  return name.empty() ? chat : gen::ChatChoice{ztok::parse_chat_template(name), "", false};
}

namespace {
// The tokenizer at `path` with the special ids data.train's shards record (ztok --special past the
// vocabulary: GPT-2's directory + <|im_start|>=50257 ...), so that prompts render with the template the
// shards were made with and answers holding those ids decode. Once a process per (path, specials).
const tok::Tokenizer& tokenizer_with_specials(const std::string& path, const std::string& specials) {
  if (specials.empty()) return load_tokenizer(path);
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, std::unique_ptr<const tok::Tokenizer>> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[{path, specials}];
  if (!slot) {
    try {
      auto t = std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(path));
      for (const tok::SpecialToken& s : tok::parse_special_tokens(specials)) t->add_special(s.text, s.id);
      slot = std::move(t);
    } catch (const Error& e) {
      loaded.erase({path, specials});
      throw InputError(cat("data.vocab=", path, " with the special ids data.train's shards record (", specials, "): ",
                           e.what(), " (set data.vocab to the vocabulary the shards were tokenized with)"));
    }
  }
  return *slot;
}
}  // namespace

const tok::Tokenizer& text_tokenizer(const config::Config& c, const std::string& key) {
  return tokenizer_with_specials(text_tokenizer_path(c, key), data::recorded_specials(c.data.train));
}

const std::vector<gen::PromptLine>& read_answer_prompts(const config::Config& c, PromptSet set) {
  const SetKeys k = keys_of(c, set);
  const std::string path = text_tokenizer_path(c, k.glob_key);
  const std::string specials = data::recorded_specials(c.data.train);
  const tok::Tokenizer& tokenizer = tokenizer_with_specials(path, specials);
  // Once a process: the memory plan's lengths, the start-up check and the trainer all read the set (a
  // million prompts tokenize for seconds). A set that fails is not kept: each caller gets its error.
  static std::mutex mutex;
  static std::map<std::tuple<std::string, std::string, std::string>, std::vector<gen::PromptLine>> read;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(k.glob, k.answer_field, path + "\n" + specials);
  if (const auto it = read.find(key); it != read.end()) return it->second;
  const gen::ChatChoice chat = training_data_template(c, gen::chat_template_of(&tokenizer, path));
  gen::PromptFormat format{&tokenizer, chat.chat, k.answer_field};
  format.tokenizer_hint = "set data.vocab";
  format.template_hint = chat.why_none;
  // ztrain has no --special: name what it can be given instead (zgen's hint would ask for --special).
  format.specials_hint = cat("neither data.vocab=", path, " nor data.train's shards give one (shards of a ztok before ",
                             "2026-12 record no --special ids): tokenize the data again with this ztok and its --special ",
                             "list, set data.vocab to a tokenizer.json that defines them, or give prompt or prompt_ids lines");
  format.answer_hint = k.answer_key;
  format.source = k.glob_key;
  return read.emplace(key, gen::read_prompts(k.glob, format)).first->second;
}

std::int64_t longest_prompt(const std::vector<gen::PromptLine>& prompts) {
  std::int64_t longest = 0;
  for (const gen::PromptLine& p : prompts) longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(p.ids.size()));
  return longest;
}

std::int64_t max_sequence_len(const config::Config& c, const std::vector<gen::PromptLine>& prompts, std::int64_t max_new,
                              const std::string& key) {
  const std::int64_t max_len = std::min(c.model.seq_len, longest_prompt(prompts) + max_new);
  for (std::size_t i = 0; i < prompts.size(); ++i)
    gen::check_request({prompts[i].ids, max_new, {}, 0}, i, c.model.vocab_size, max_len, cat(prompts[i].where, " (", key, ")"),
                       cat("model.seq_len=", c.model.seq_len, ": shorten it or raise model.seq_len"));
  return max_len;
}

void check_rl_inputs(const config::Config& c, std::int64_t dp_size) {
  rl::check_batch_layout(rl::layout_of(c, static_cast<int>(dp_size)));
  text_tokenizer(c, "rl.reward");
  max_sequence_len(c, read_answer_prompts(c, PromptSet::kRl), c.rl.max_new_tokens,
                   "rl.prompts");
}

plan::GenerationLengths known_generation_lengths(const config::Config& c) {
  // The set's longest sequence, its prompt count and its longest prompt, or zeros where it cannot be read here.
  struct Known {
    std::int64_t sequence = 0, prompts = 0, prompt = 0;
  };
  const auto known = [&](PromptSet set, const std::string& glob, std::int64_t max_new, const std::string& key) -> Known {
    if (glob.empty()) return {};
    try {
      const std::vector<gen::PromptLine>& prompts = read_answer_prompts(c, set);
      return {max_sequence_len(c, prompts, max_new, key), static_cast<std::int64_t>(prompts.size()), longest_prompt(prompts)};
    } catch (const Error&) {
      return {};  // the start-up checks say why
    }
  };
  const Known rl = known(PromptSet::kRl, c.rl.prompts, c.rl.max_new_tokens, "rl.prompts");
  const Known eval = known(PromptSet::kEvaluation, c.log.eval_prompts, c.log.eval_max_new_tokens, "log.eval_prompts");
  return {.rollouts = rl.sequence, .evaluation = eval.sequence, .evaluation_prompts = eval.prompts,
          .rollout_prompt = rl.prompt, .evaluation_prompt = eval.prompt};
}

}  // namespace zt::train
