// The ztok job: settings and resume checks, the ordered tokenize -> route -> shard loop, checkpoints
// and the progress line.
#include "ztok/run.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>

#include "core/error.hpp"
#include "core/sha256.hpp"
#include "io/dir_probe.hpp"
#include "ztok/tokenize_stream.hpp"
#include "ztok/progress.hpp"
#include "ztok/utf8_report.hpp"

namespace zt::ztok {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Routes each tokenized chunk to the train or valid stream and saves checkpoints.
class Job {
 public:
  Job(const ZtokOptions& o, const std::vector<std::string>& inputs, const data::TokenizerInfo& info, ZtokProgress progress)
      : options_(o), inputs_(inputs), progress_(std::move(progress)),
        train_(o.out_dir, "train", info, o.shard_tokens, progress_.train),
        valid_(o.out_dir, "valid", info, o.shard_tokens, progress_.valid), utf8_(inputs, false) {}

  void add(const TokenizedChunk& r) {
    const std::uint64_t shards = train_.shards_completed() + valid_.shards_completed();
    route_chunk(r, inputs_, options_.valid_fraction, [&](const RoutedSegment& s) {
      ShardStream& out = s.valid ? valid_ : train_;
      if (s.doc_start) out.begin_document();
      out.append(s.ids, inputs_[s.file]);
      progress_.documents += s.doc_end;
    });
    progress_.replacements += r.replacements;
    utf8_.add(r);
    progress_.position = r.chunk.end;
    if (options_.debug_kill_after_chunks > 0 && options_.debug_kill_rank == 0 && ++chunks_ == options_.debug_kill_after_chunks)
      std::raise(SIGKILL);
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
    utf8_.finish();
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
  InvalidUtf8Report utf8_;
  Clock::time_point last_save_ = Clock::now();
  std::uint64_t chunks_ = 0;
};

}  // namespace

void check_options(const ZtokOptions& o) {
  if (o.shard_tokens == 0) throw InputError("--shard-tokens must be at least 1");
  if (!(o.valid_fraction >= 0 && o.valid_fraction <= 1)) throw InputError("--valid-fraction must be within [0, 1]");
  check_out_dir(o.out_dir);
}

void check_out_dir(const std::filesystem::path& out) {
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && !std::filesystem::is_directory(out, ec))
    throw InputError(cat("--out ", out.string(), " exists and is not a directory: give a directory for the shards"));
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  const std::string problem = io::probe_writable_dir(out, host);  // creates it when missing
  if (!problem.empty())
    throw InputError(cat("--out ", out.string(), ": ", problem, ": choose a directory you can write (or fix its ",
                         "permissions), then run the same command again"));
}

ZtokSettings ztok_settings(const ZtokOptions& o, const std::vector<std::string>& inputs, const std::string& vocab_hash) {
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

void route_chunk(const TokenizedChunk& r, const std::vector<std::string>& inputs, double valid_fraction,
                 const std::function<void(const RoutedSegment&)>& sink) {
  for (std::size_t i = 0; i < r.chunk.segments.size(); ++i) {
    const Segment& s = r.chunk.segments[i];
    const std::uint64_t begin = i == 0 ? 0 : r.token_end[i - 1];
    sink({is_validation_document(inputs[s.file], s.doc, valid_fraction), s.doc_start, s.doc_end, s.file,
          std::span(r.tokens).subspan(begin, r.token_end[i] - begin)});
  }
}

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
  check_options(o);
  const tok::Tokenizer tokenizer = tok::Tokenizer::load(o.vocab_dir, o.vocabulary);
  const std::vector<std::string> inputs = expand_inputs(o.inputs);
  const ZtokSettings settings = ztok_settings(o, inputs, tokenizer.vocab().hash());
  std::uint64_t input_bytes = 0;
  for (const auto& in : settings.inputs) input_bytes += in.second;
  ZtokProgress progress = start_or_resume(o.out_dir, settings, 1);
  const bool resumed = progress.position != InputPosition{} || progress.complete;
  if (progress.complete) {
    ZtokSummary s = summary_of(progress, input_bytes);
    s.already_complete = s.resumed = true;
    return s;
  }
  const data::TokenizerInfo info = shard_tokenizer_info(tokenizer);
  Job job(o, inputs, info, progress);
  const CorpusOptions corpus = cutting_safely_for(o.corpus, tokenizer);
  CorpusReader reader(inputs, corpus, progress.position, o.chunk_bytes);
  ProgressMeter meter(o.show_progress, input_bytes);
  {
    TokenizeStream stream(tokenizer, reader, corpus, o.threads, 2 * static_cast<std::size_t>(o.threads) + 2);
    TokenizedChunk result;
    for (bool first = true; stream.next(result); first = false) {
      if (first) meter.start_at(result.chunk.file_bytes);
      job.add(result);
      meter.update(result.chunk.file_bytes, job.tokens());
    }
  }
  return_freed_memory();  // before the last shards are written
  job.finish();
  std::error_code ignored;
  std::filesystem::remove(o.out_dir / ".ztok", ignored);  // the journal folder, now empty
  meter.update(input_bytes, job.tokens(), true);
  ZtokSummary s = summary_of(job.progress(), input_bytes);
  s.resumed = resumed;
  s.seconds = seconds_since(start);
  return s;
}

}  // namespace zt::ztok
