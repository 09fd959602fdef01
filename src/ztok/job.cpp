// The ztok job on a group of ranks (job.hpp): start-up checks, each rank's block into its journals
// (resumable from its progress file), shards cut as they fill on a rank alone, the exchange of
// counts, the other shards cut round robin, and the progress line over every rank.
#include "ztok/job.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <optional>
#include <thread>

#include "core/error.hpp"
#include "io/dir_flock.hpp"
#include "ztok/shard_assembly.hpp"
#include "ztok/tokenize_stream.hpp"
#include "ztok/heartbeat.hpp"
#include "ztok/utf8_report.hpp"
#include "tok/tokenizer.hpp"

namespace zt::ztok {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// OUT/.ztok/rank_00002.train (.tokens, .docs, .runs): a rank's journal of a split.
fs::path journal_stem(const fs::path& out, std::uint64_t rank, const char* split) {
  return rank_progress_path(out, rank).replace_extension(split);
}

std::uint64_t split_tokens(const std::vector<JournalPart>& parts) {
  return parts.empty() ? 0 : parts.back().first + parts.back().counts.tokens;
}

}  // namespace

std::vector<std::size_t> split_inputs(const std::vector<std::uint64_t>& sizes, int ranks) {
  ZT_CHECK_GE(ranks, 1);
  long double total = 0, before = 0;
  for (const std::uint64_t s : sizes) total += static_cast<long double>(s);
  std::vector<int> owner(sizes.size());  // non-decreasing: the blocks are contiguous
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const long double middle = before + static_cast<long double>(sizes[i]) / 2;
    owner[i] = total > 0 ? std::min(ranks - 1, static_cast<int>(ranks * middle / total)) : 0;
    before += static_cast<long double>(sizes[i]);
  }
  std::vector<std::size_t> first(static_cast<std::size_t>(ranks) + 1);
  for (int r = 0; r <= ranks; ++r)
    first[static_cast<std::size_t>(r)] =
        static_cast<std::size_t>(std::lower_bound(owner.begin(), owner.end(), r) - owner.begin());
  return first;
}

struct ZtokJob::Totals {
  std::vector<JournalPart> train, valid;  // every rank's journal, in rank order
  std::uint64_t train_cut = 0, valid_cut = 0;  // shards [0, n) a rank alone cut while tokenizing
  std::uint64_t train_docs = 0, valid_docs = 0, documents = 0, replacements = 0;
  bool resumed = false;                   // some rank continued from a saved state
};

ZtokJob::ZtokJob(const ZtokOptions& o, const RankGroup& group) : options_(o), group_(group) {
  check_options(o);
  // Rank 0 locks OUT before it starts or resumes the run there; the others once it has (check_shared_view),
  // so that a second command refused on rank 0 leaves not even its other ranks' lock files.
  if (group.rank() == 0) out_lock_ = lock_out_dir(o.out_dir, 0);
  tokenizer_ = std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(o.vocab_dir, o.vocabulary));
  inputs_ = inputs_outside_out(expand_inputs(o.inputs), o.out_dir);
  settings_ = ztok_settings(o, inputs_, tokenizer_->vocab().hash());
  std::vector<std::uint64_t> sizes;
  for (const auto& in : settings_.inputs) sizes.push_back(in.second);
  for (const std::uint64_t s : sizes) input_bytes_ += s;
  blocks_ = split_inputs(sizes, group.size());
  if (group.rank() == 0) progress_ = start_or_resume(o.out_dir, settings_, static_cast<std::uint64_t>(group.size()));
}

ZtokJob::~ZtokJob() = default;

void ZtokJob::check_shared_view() {
  const std::uint64_t run_id = group_.all_gather({progress_.run_id})[0];  // the run rank 0 started or resumed
  if (group_.rank() == 0) return;
  out_lock_ = lock_out_dir(options_.out_dir, static_cast<std::uint64_t>(group_.rank()));  // before this rank writes OUT
  std::optional<ZtokProgress> seen;
  for (int attempt = 0; attempt < 20; ++attempt) {  // a network file system may show a new file late
    seen = load_progress(options_.out_dir);
    if (seen && seen->run_id == run_id) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const std::string where = cat("rank ", group_.rank(), " reads ", (options_.out_dir / kProgressFile).string());
  if (!seen || seen->run_id != run_id)
    throw InputError(cat(where, seen ? ", but not the one rank 0 wrote" : ", but finds none",
                         ": --out must be a directory that every rank sees (a shared file system)"));
  const std::string diff = settings_difference(seen->settings, settings_);
  if (!diff.empty())
    throw InputError(cat(where, ": rank 0 started the run on other inputs or another vocabulary than this rank sees (",
                         diff, "); every rank must see the same files"));
  progress_ = *seen;
}

// Where this rank's block stands: its saved progress (resumed), or its start.
RankProgress ZtokJob::block_start(bool& resumed) const {
  const fs::path& out = options_.out_dir;
  const auto r = static_cast<std::uint64_t>(group_.rank());
  const std::optional<RankProgress> saved = load_rank_progress(out, r);
  resumed = saved.has_value();
  RankProgress p = saved.value_or(RankProgress{.rank = r, .first_input = blocks_[r], .end_input = blocks_[r + 1]});
  if (p.first_input != blocks_[r] || p.end_input != blocks_[r + 1])
    throw InputError(cat(rank_progress_path(out, r).string(), " holds inputs [", p.first_input, ", ", p.end_input,
                         ") but this run gives rank ", r, " [", blocks_[r], ", ", blocks_[r + 1], "): delete ",
                         out.string(), " and start over"));
  return p;
}

// This rank's journals of the two splits while it tokenizes its block. A rank alone (its journals
// start the splits) also cuts each shard the moment its journal holds all the shard's ids, and frees
// the ids of the shards its saved progress file records as cut: no resume reads them again.
class ZtokJob::Journals {
 public:
  Journals(const ZtokJob& job, RankProgress& p)
      : options_(job.options_), inputs_(job.inputs_), p_(p), info_(shard_tokenizer_info(*job.tokenizer_)),
        cut_when_full_(job.group_.size() == 1),
        train_(journal_stem(options_.out_dir, p.rank, "train"), data::shard_ids_are_wide(info_.vocab_size), p.train),
        valid_(journal_stem(options_.out_dir, p.rank, "valid"), data::shard_ids_are_wide(info_.vocab_size), p.valid) {}

  std::uint64_t tokens() const { return train_.counts().tokens + valid_.counts().tokens; }

  // A routed segment's ids, from input `input` of the run.
  void append(const RoutedSegment& s, std::uint64_t input) {
    JournalWriter& journal = s.valid ? valid_ : train_;
    if (s.doc_start) journal.begin_document();
    const std::uint64_t size = options_.shard_tokens;
    for (std::span<const std::uint32_t> ids = s.ids; !ids.empty();) {
      const std::uint64_t room = cut_when_full_ ? size - journal.counts().tokens % size : ids.size();
      const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(ids.size(), room));
      journal.append(ids.first(take), input);  // in pieces: the same files as whole
      ids = ids.subspan(take);
      if (cut_when_full_ && journal.counts().tokens % size == 0) cut(s.valid);
    }
  }

  // Whether a shard was cut since the last save (a save records it).
  bool cut_since_save() const { return cut_since_save_; }

  // Makes the journals durable and records them, and the shards cut, in this rank's progress file.
  void save() {
    p_.train = train_.sync();
    p_.valid = valid_.sync();
    save_rank_progress(options_.out_dir, p_);
    cut_since_save_ = false;
    train_.release_before(p_.train_shards * options_.shard_tokens);
    valid_.release_before(p_.valid_shards * options_.shard_tokens);
  }

 private:
  // Writes the split's next shard, whose last id the journal just received.
  void cut(bool valid) {
    JournalWriter& journal = valid ? valid_ : train_;
    std::uint64_t& index = valid ? p_.valid_shards : p_.train_shards;
    ZT_CHECK_EQ(index + 1, journal.counts().tokens / options_.shard_tokens, "shards cut from ", p_.rank, "'s journal");
    journal.flush();  // the reader sees every id appended
    const char* split = valid ? "valid" : "train";
    assemble_shard(options_.out_dir / shard_file_name(split, index), info_, options_.shard_tokens, index,
                   {{journal_stem(options_.out_dir, p_.rank, split), journal.counts(), 0}}, inputs_);
    ++index;
    cut_since_save_ = true;
  }

  const ZtokOptions& options_;
  const std::vector<std::string>& inputs_;
  RankProgress& p_;
  data::TokenizerInfo info_;
  bool cut_when_full_;
  JournalWriter train_, valid_;
  bool cut_since_save_ = false;
};

RankProgress ZtokJob::tokenize_block(const std::function<void(std::uint64_t, std::uint64_t)>& line,
                                     bool& resumed) const {
  RankProgress p = block_start(resumed);
  if (p.done) return p;
  fs::create_directories(options_.out_dir / ".ztok");
  Journals journals(*this, p);
  const std::vector<std::string> block(inputs_.begin() + static_cast<std::ptrdiff_t>(p.first_input),
                                       inputs_.begin() + static_cast<std::ptrdiff_t>(p.end_input));
  std::uint64_t base = 0;  // bytes of the block's inputs before the one reading resumes in
  for (std::uint64_t i = 0; i < p.position.file && i < block.size(); ++i)
    base += settings_.inputs[p.first_input + i].second;
  const CorpusOptions corpus = cutting_safely_for(options_.corpus, *tokenizer_);
  CorpusReader reader(block, corpus, p.position, options_.chunk_bytes);
  std::vector<std::uint64_t> sizes;  // as recorded when the run started
  for (std::uint64_t i = p.first_input; i < p.end_input; ++i) sizes.push_back(settings_.inputs[i].second);
  reader.expect_sizes(std::move(sizes));
  TokenizeStream stream(*tokenizer_, reader, corpus, options_.threads,
                        2 * static_cast<std::size_t>(options_.threads) + 2);
  Clock::time_point saved_at = Clock::now();
  std::uint64_t chunks = 0;
  InvalidUtf8Report utf8(block, group_.size() > 1);
  for (TokenizedChunk c; stream.next(c);) {
    utf8.add(c);
    route_chunk(c, block, options_.valid_fraction, [&](const RoutedSegment& s) {
      journals.append(s, p.first_input + s.file);
      p.documents += s.doc_end;
    });
    p.replacements += c.replacements;
    p.position = c.chunk.end;
    p.input_bytes = base + c.chunk.file_bytes;
    if (options_.debug_kill_after_chunks > 0 && options_.debug_kill_rank == group_.rank() &&
        ++chunks == options_.debug_kill_after_chunks)
      std::raise(options_.debug_kill_signal);
    if (journals.cut_since_save() || seconds_since(saved_at) >= options_.checkpoint_seconds) {
      journals.save();  // at a chunk's end (where reading resumes), and after a shard, not to write it again
      saved_at = Clock::now();
    }
    line(p.input_bytes, journals.tokens());
  }
  utf8.finish();
  p.done = true;
  journals.save();
  return p;
}

ZtokJob::Totals ZtokJob::exchange(const RankProgress& mine, bool resumed) const {
  const std::vector<std::uint64_t> all = group_.all_gather(
      {mine.train.tokens, mine.train.docs, mine.train.runs, mine.valid.tokens, mine.valid.docs, mine.valid.runs,
       mine.documents, mine.replacements, resumed ? 1u : 0u, mine.train_shards, mine.valid_shards});
  constexpr std::size_t kFields = 11;
  Totals t;
  std::uint64_t train_first = 0, valid_first = 0;
  for (std::size_t r = 0; r < static_cast<std::size_t>(group_.size()); ++r) {
    const std::uint64_t* f = all.data() + r * kFields;
    t.train.push_back({journal_stem(options_.out_dir, r, "train"), {f[0], f[1], f[2]}, train_first});
    t.valid.push_back({journal_stem(options_.out_dir, r, "valid"), {f[3], f[4], f[5]}, valid_first});
    train_first += f[0];
    valid_first += f[3];
    t.train_docs += f[1];
    t.valid_docs += f[4];
    t.documents += f[6];
    t.replacements += f[7];
    t.resumed = t.resumed || f[8] != 0;
    if (r == 0) {  // only a rank alone cuts while tokenizing
      t.train_cut = f[9];
      t.valid_cut = f[10];
    }
  }
  return t;
}

void ZtokJob::write_shards(const Totals& t, Heartbeat& heartbeat) const {
  const data::TokenizerInfo info = shard_tokenizer_info(*tokenizer_);
  std::vector<std::pair<bool, std::uint64_t>> todo;  // (valid, index) of the shards not cut yet
  for (std::uint64_t k = t.train_cut; k < shard_count(split_tokens(t.train), options_.shard_tokens); ++k)
    todo.emplace_back(false, k);
  for (std::uint64_t k = t.valid_cut; k < shard_count(split_tokens(t.valid), options_.shard_tokens); ++k)
    todo.emplace_back(true, k);
  for (auto j = static_cast<std::size_t>(group_.rank()); j < todo.size(); j += static_cast<std::size_t>(group_.size())) {
    const auto [valid, index] = todo[j];
    const std::string name = shard_file_name(valid ? "valid" : "train", index);
    heartbeat.beat("writing shard " + name);
    assemble_shard(options_.out_dir / name, info, options_.shard_tokens, index, valid ? t.valid : t.train, inputs_);
  }
}

// Rank 0, once every shard is written: the run is complete (its totals recorded), the journals go.
void ZtokJob::finish(const Totals& t) {
  for (auto [totals, parts, docs] : {std::tuple(&progress_.train, &t.train, t.train_docs),
                                     std::tuple(&progress_.valid, &t.valid, t.valid_docs)}) {
    totals->tokens = split_tokens(*parts);
    totals->docs = docs;
    totals->shards = shard_count(totals->tokens, options_.shard_tokens);
  }
  progress_.documents = t.documents;
  progress_.replacements = t.replacements;
  progress_.complete = true;
  save_progress(options_.out_dir, progress_);
  fs::remove_all(options_.out_dir / ".ztok");
}

ZtokSummary ZtokJob::run() {
  const Clock::time_point start = Clock::now();
  if (progress_.complete) {
    if (group_.rank() == 0) fs::remove_all(options_.out_dir / ".ztok");  // left by a run killed as it completed
    ZtokSummary s = summary_of(progress_, input_bytes_);
    s.already_complete = s.resumed = true;
    return s;
  }
  RanksProgressLine line(group_.rank() == 0 && options_.show_progress, options_.out_dir, group_.size(), input_bytes_);
  fs::create_directories(options_.out_dir / ".ztok");
  Heartbeat heartbeat(options_.out_dir, group_.rank(), group_.size(), options_.timeout_s);
  bool resumed = false;
  const RankProgress mine = tokenize_block(
      [&](std::uint64_t bytes, std::uint64_t tokens) {
        line.update(bytes, tokens);
        heartbeat.beat("tokenizing");
      },
      resumed);
  return_freed_memory();  // before the (other) shards are cut
  const std::uint64_t my_tokens = mine.train.tokens + mine.valid.tokens;
  group_.wait_for_all(0.1, [&] {  // sleeps while others tokenize
    line.update(mine.input_bytes, my_tokens);
    heartbeat.check("done tokenizing, waiting for the others");
  });
  const Totals totals = exchange(mine, resumed);  // small: under the world's fixed deadline (--timeout-s)
  line.finish(input_bytes_, split_tokens(totals.train) + split_tokens(totals.valid));
  write_shards(totals, heartbeat);
  group_.wait_for_all(0.1, [&] { heartbeat.check("done writing shards, waiting for the others"); });
  // Once more without beating: a peer may still be in its last heartbeat above (writing OUT/.ztok/alive.N)
  // when this rank leaves the wait, and finish() removing .ztok then failed with "Directory not empty".
  group_.wait_for_all(0.1, [] {});
  if (group_.rank() == 0) finish(totals);
  ZtokSummary s = summary_of(progress_, input_bytes_);
  if (group_.rank() != 0) s = {};  // rank 0 reports
  s.resumed = totals.resumed;
  s.seconds = seconds_since(start);
  return s;
}

ZtokSummary run_ztok(const ZtokOptions& options) {
  const OneRank one;
  ZtokJob job(options, one);
  job.check_shared_view();
  return job.run();
}

}  // namespace zt::ztok
