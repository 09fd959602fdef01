// The ztok job: settings and resume checks, the ordered tokenize -> route -> shard loop, checkpoints
// and the progress line.
#include "data/ztok_run.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>

#include "core/error.hpp"
#include "core/sha256.hpp"
#include "data/tokenize_stream.hpp"
#include "data/ztok_progress.hpp"

namespace zt::data {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One line on stderr, redrawn in place on a terminal, else printed every 30 s.
class ProgressMeter {
 public:
  ProgressMeter(bool enabled, std::uint64_t total_bytes) : enabled_(enabled), total_(total_bytes), tty_(::isatty(2)) {}
  void update(std::uint64_t bytes, std::uint64_t tokens, bool last = false) {
    const double elapsed = seconds_since(start_);
    if (!enabled_ || (!last && elapsed - shown_ < (tty_ ? 1.0 : 30.0))) return;
    shown_ = elapsed;
    const double mb_per_s = (bytes - first_bytes_) / 1e6 / std::max(elapsed, 1e-9);
    const double eta = mb_per_s > 0 ? (total_ - std::min(bytes, total_)) / 1e6 / mb_per_s : 0;
    std::fprintf(stderr, "%sztok: %5.1f%%  %.1f / %.1f MB  %.1f MB/s  %.2fM tokens  ETA %d:%02d:%02d%s",
                 tty_ ? "\r" : "", total_ ? 100.0 * bytes / total_ : 100.0, bytes / 1e6, total_ / 1e6, mb_per_s,
                 tokens / 1e6, int(eta) / 3600, int(eta) / 60 % 60, int(eta) % 60, tty_ && !last ? "" : "\n");
  }
  void start_at(std::uint64_t bytes) { first_bytes_ = bytes; }

 private:
  bool enabled_;
  std::uint64_t total_, first_bytes_ = 0;
  bool tty_;
  Clock::time_point start_ = Clock::now();
  double shown_ = 0;
};

ZtokSettings settings_of(const ZtokOptions& o, const std::vector<std::string>& inputs, const std::string& vocab_hash) {
  ZtokSettings s;
  s.vocab_hash = vocab_hash;
  s.format = o.corpus.format == InputFormat::kJsonl ? "jsonl" : "text";
  s.field = o.corpus.format == InputFormat::kJsonl ? o.corpus.field : "";
  s.split = o.corpus.split == SplitMode::kParagraph ? "paragraph" : "file";
  s.shard_tokens = o.shard_tokens;
  s.valid_fraction = o.valid_fraction;
  for (const std::string& in : inputs) s.inputs.emplace_back(in, std::filesystem::file_size(in));
  return s;
}

// The state to start from: a matching interrupted run's, or a fresh one in a directory without shards.
ZtokProgress starting_point(const std::filesystem::path& out, const ZtokSettings& settings) {
  std::filesystem::create_directories(out);
  if (std::optional<ZtokProgress> saved = load_progress(out)) {
    const std::string diff = settings_difference(saved->settings, settings);
    if (!diff.empty())
      throw InputError(cat("--out ", out.string(), " holds a ztok run with other settings (", diff,
                           "); shards made two ways must not mix: use another --out, or delete it to start over"));
    return *saved;
  }
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if ((name.rfind("train_", 0) == 0 || name.rfind("valid_", 0) == 0) && entry.path().extension() == ".h5")
      throw InputError(cat("--out ", out.string(), " already holds shards (", name, ") but no ", kProgressFile,
                           ": use an empty --out directory"));
  }
  ZtokProgress fresh;
  fresh.settings = settings;
  save_progress(out, fresh);  // before any shard exists: a killed first run is resumable, not "foreign"
  return fresh;
}

// Routes each tokenized chunk to the train or valid stream and saves checkpoints.
class Job {
 public:
  Job(const ZtokOptions& o, const std::vector<std::string>& inputs, const TokenizerInfo& info, ZtokProgress progress)
      : options_(o), inputs_(inputs), progress_(std::move(progress)),
        train_(o.out_dir, "train", info, o.shard_tokens, progress_.train),
        valid_(o.out_dir, "valid", info, o.shard_tokens, progress_.valid) {}

  void add(const TokenizedChunk& r) {
    const std::uint64_t shards = train_.shards_completed() + valid_.shards_completed();
    for (std::size_t i = 0; i < r.chunk.segments.size(); ++i) {
      const Segment& s = r.chunk.segments[i];
      const std::string& source = inputs_[s.file];
      ShardStream& out = is_validation_document(source, s.doc, options_.valid_fraction) ? valid_ : train_;
      if (s.doc_start) out.begin_document();
      const std::uint64_t begin = i == 0 ? 0 : r.token_end[i - 1];
      out.append(std::span(r.tokens).subspan(begin, r.token_end[i] - begin), source);
      progress_.documents += s.doc_end;
    }
    progress_.replacements += r.replacements;
    progress_.position = r.chunk.end;
    if (options_.debug_kill_after_chunks > 0 && ++chunks_ == options_.debug_kill_after_chunks) std::raise(SIGKILL);
    if (shards != train_.shards_completed() + valid_.shards_completed() ||
        seconds_since(last_save_) >= options_.checkpoint_seconds)
      checkpoint(false);
  }

  void checkpoint(bool complete) {
    progress_.train = train_.sync();
    progress_.valid = valid_.sync();
    progress_.complete = complete;
    save_progress(options_.out_dir, progress_);
    train_.saved();
    valid_.saved();
    last_save_ = Clock::now();
  }

  void finish() {
    train_.finish();
    valid_.finish();
    checkpoint(true);
  }
  const ZtokProgress& progress() const { return progress_; }
  std::uint64_t tokens() const { return train_.total_tokens() + valid_.total_tokens(); }

 private:
  const ZtokOptions& options_;
  const std::vector<std::string>& inputs_;
  ZtokProgress progress_;
  ShardStream train_, valid_;
  Clock::time_point last_save_ = Clock::now();
  std::uint64_t chunks_ = 0;
};

ZtokSummary summary_of(const ZtokProgress& p, std::uint64_t input_bytes) {
  ZtokSummary s;
  s.documents = p.documents;
  s.replacements = p.replacements;
  s.input_bytes = input_bytes;
  s.train_tokens = p.train.total_tokens;
  s.valid_tokens = p.valid.total_tokens;
  s.train_shards = p.train.shard;
  s.valid_shards = p.valid.shard;
  return s;
}

}  // namespace

bool is_validation_document(const std::string& source, std::uint64_t doc, double fraction) {
  if (fraction <= 0) return false;
  if (fraction >= 1) return true;
  const Sha256::Digest d = [&] {
    Sha256 h;
    h.update(source);
    h.update(cat("\n", doc));
    return h.finish();
  }();
  std::uint64_t x = 0;
  for (int i = 0; i < 8; ++i) x = (x << 8) | d[i];
  return static_cast<double>(x >> 11) * 0x1.0p-53 < fraction;
}

ZtokSummary run_ztok(const ZtokOptions& o) {
  const Clock::time_point start = Clock::now();
  if (o.shard_tokens == 0) throw InputError("--shard-tokens must be at least 1");
  if (!(o.valid_fraction >= 0 && o.valid_fraction <= 1)) throw InputError("--valid-fraction must be within [0, 1]");
  const tok::Tokenizer tokenizer = tok::Tokenizer::load(o.vocab_dir);
  const std::vector<std::string> inputs = expand_inputs(o.inputs);
  const ZtokSettings settings = settings_of(o, inputs, tokenizer.vocab().hash());
  std::uint64_t input_bytes = 0;
  for (const auto& in : settings.inputs) input_bytes += in.second;
  ZtokProgress progress = starting_point(o.out_dir, settings);
  const bool resumed = progress.position != InputPosition{} || progress.complete;
  if (progress.complete) {
    ZtokSummary s = summary_of(progress, input_bytes);
    s.already_complete = s.resumed = true;
    return s;
  }
  const TokenizerInfo info{"gpt2", tokenizer.vocab().hash(), tokenizer.vocab().size(), tokenizer.vocab().eot()};
  Job job(o, inputs, info, progress);
  CorpusReader reader(inputs, o.corpus, progress.position, o.chunk_bytes);
  ProgressMeter meter(o.show_progress, input_bytes);
  {
    TokenizeStream stream(tokenizer, reader, o.corpus, o.threads, 2 * static_cast<std::size_t>(o.threads) + 2);
    TokenizedChunk result;
    for (bool first = true; stream.next(result); first = false) {
      if (first) meter.start_at(result.chunk.file_bytes);
      job.add(result);
      meter.update(result.chunk.file_bytes, job.tokens());
    }
  }
  job.finish();
  std::error_code ignored;
  std::filesystem::remove(o.out_dir / ".ztok", ignored);  // the journal folder, now empty
  meter.update(input_bytes, job.tokens(), true);
  ZtokSummary s = summary_of(job.progress(), input_bytes);
  s.resumed = resumed;
  s.seconds = seconds_since(start);
  return s;
}

}  // namespace zt::data
