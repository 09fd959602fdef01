// The instruct job: read every record, render and tokenize it, route it to train or valid, lay the
// samples out, then write each split's shards.
#include "ztok/instruct_run.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "io/dir_flock.hpp"
#include "ztok/corpus.hpp"
#include "ztok/instruct_records.hpp"
#include "ztok/progress.hpp"
#include "ztok/run.hpp"
#include "ztok/sample_packing.hpp"
#include "data/shard.hpp"
#include "ztok/shard_assembly.hpp"
#include "ztok/tokenize_stream.hpp"

namespace zt::ztok {
namespace {

void refuse_used_out_dir(const std::filesystem::path& out) {
  std::error_code ec;
  if (!std::filesystem::is_directory(out, ec)) return;
  for (const auto& entry : std::filesystem::directory_iterator(out))
    if (entry.path().extension() == ".h5" || entry.path().filename() == "ztok-progress.json")
      throw ConfigError(cat("--out ", out.string(), " already holds shards (", entry.path().filename().string(),
                            "): give an empty or new directory, or remove them first"));
}

// The split's shards: at most shard_tokens tokens each (packed: whole windows, at least one).
std::uint64_t write_split(const std::filesystem::path& out, const char* prefix, const SampleLayout& layout,
                          const data::TokenizerInfo& info, const data::InstructLayout& shape, std::uint64_t shard_tokens,
                          const std::vector<std::string>& sources) {
  const std::vector<std::uint32_t>& tokens = layout.tokens();
  std::uint64_t per_shard = shard_tokens;
  if (shape.window > 0) per_shard = std::max<std::uint64_t>(1, shard_tokens / shape.window) * shape.window;
  std::uint64_t index = 0;
  for (std::uint64_t start = 0; start < tokens.size(); start += per_shard, ++index) {
    const std::uint64_t n = std::min<std::uint64_t>(per_shard, tokens.size() - start);
    const std::vector<std::uint64_t>& starts = layout.sample_starts();  // ascending
    std::vector<std::uint64_t> docs;
    for (auto it = std::lower_bound(starts.begin(), starts.end(), start); it != starts.end() && *it < start + n; ++it)
      docs.push_back(*it - start);
    data::ShardWriter w(out / shard_file_name(prefix, index), info, n, docs.size(), sources, shape);
    w.append_tokens(std::span(tokens).subspan(start, n));
    w.append_loss_mask(std::span(layout.loss_mask()).subspan(start, n));
    w.append_doc_offsets(docs);
    w.commit();
  }
  return index;
}

// The shards' `specials` attribute: the --special tokens past the vocabulary (its own, given again, are
// covered by vocab_hash), by id, "NAME=ID,...".
std::string declared_specials_text(std::vector<tok::SpecialToken> specials, const tok::Tokenizer& tokenizer) {
  std::erase_if(specials, [&](const tok::SpecialToken& s) { return s.id < tokenizer.vocab().size(); });
  std::sort(specials.begin(), specials.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  std::string text;
  for (const tok::SpecialToken& s : specials) text += cat(text.empty() ? "" : ",", s.text, "=", s.id);
  return text;
}

// A write error's fix as an instruction run must follow it: it does not resume, so the advice to run
// the same command again (data::kZtokResumeAdvice) becomes starting over in an emptied --out.
[[noreturn]] void rethrow_for_instruct(const IoError& e, const std::filesystem::path& out) {
  std::string what = e.what();
  const std::string resume = data::kZtokResumeAdvice;
  if (const std::size_t at = what.find(resume); at != std::string::npos)
    what.replace(at, resume.size(), cat("run the command again into an empty --out (remove ", out.string(),
                                        "'s shards and ztok-progress.json first): an instruction run does not resume"));
  throw IoError(what);
}

}  // namespace

InstructSummary run_instruct(const ZtokOptions& o, const InstructOptions& instruct) {
  check_options(o);
  const auto out_lock = lock_out_dir(o.out_dir, 0);  // held until the last shard and the progress file are written
  const tok::Tokenizer tokenizer = tok::Tokenizer::load(o.vocab_dir, o.vocabulary);  // --special declared past it
  check_template_specials(instruct.chat_template, tokenizer);
  const std::vector<std::string> inputs = inputs_outside_out(expand_inputs(o.inputs), o.out_dir);
  refuse_used_out_dir(o.out_dir);
  const std::uint64_t window = instruct.pack_seq_len > 0 ? instruct.pack_seq_len + 1 : 0;
  const std::uint32_t pad = tokenizer.vocab().eot();  // padding is never a target: any id serves
  SampleLayout train(window, pad), valid(window, pad);
  tok::Encoder encoder(tokenizer);
  InstructSummary s;
  for (const std::string& path : inputs)
    for_each_line(path, [&](std::string_view line, std::uint64_t number) {
      if (std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; })) return;
      if (o.corpus.strict_utf8) refuse_ill_formed_jsonl_line(line, cat(path, ":", number));
      std::string repaired;  // as --format jsonl reads a line
      s.replacements += repaired_jsonl_line(line, repaired);
      const std::vector<ChatMessage> messages = parse_instruct_record(repaired, cat(path, ":", number));
      const bool to_valid = is_validation_document(path, s.records++, o.valid_fraction);
      (to_valid ? valid : train).add(render_chat(instruct.chat_template, messages, tokenizer, encoder));
    });
  if (s.records == 0) throw InputError(cat("no instruction record in ", inputs.size(), " input file(s)"));
  train.finish();
  valid.finish();
  std::filesystem::create_directories(o.out_dir);
  // The template writes its own BOS where it has one, so no `bos` attribute; vocab_size covers the
  // specials declared past the vocabulary.
  data::TokenizerInfo info = shard_tokenizer_info(tokenizer);
  info.vocab_size = tokenizer.n_ids();
  info.bos.reset();
  info.specials = declared_specials_text(o.vocabulary.specials, tokenizer);
  const data::InstructLayout shape{true, to_string(instruct.chat_template), window};
  // "complete": false until the last shard is in place: a run killed while writing leaves a directory
  // ztrain refuses (data::open_shard_set), not a set of shards that looks finished.
  ZtokProgress progress;
  progress.settings = ztok_settings(o, inputs, info.vocab_hash);
  progress.settings.format = "instruct";
  progress.settings.field.clear();
  try {
    save_progress(o.out_dir, progress);
    s.train_shards = write_split(o.out_dir, "train", train, info, shape, o.shard_tokens, inputs);
    s.valid_shards = write_split(o.out_dir, "valid", valid, info, shape, o.shard_tokens, inputs);
  } catch (const IoError& e) {
    rethrow_for_instruct(e, o.out_dir);
  }
  s.train_tokens = train.tokens().size();
  s.valid_tokens = valid.tokens().size();
  progress.train = {s.train_shards, s.train_tokens, train.samples()};
  progress.valid = {s.valid_shards, s.valid_tokens, valid.samples()};
  progress.documents = s.records;
  progress.replacements = s.replacements;
  progress.complete = true;
  try {
    save_progress(o.out_dir, progress);
  } catch (const IoError& e) {
    rethrow_for_instruct(e, o.out_dir);
  }
  s.masked_in_tokens = train.trained_tokens() + valid.trained_tokens();
  s.samples_cut = train.samples_cut() + valid.samples_cut();
  s.padding_tokens = train.padding_tokens() + valid.padding_tokens();
  return s;
}

}  // namespace zt::ztok
